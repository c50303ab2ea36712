"""The reference beside awf in `cargo bench --bench engine`: the same fan-out in bare asyncio, with
no records. An "agent" is an object whose turn yields once (the model call's suspension point) and
then answers one schema-shaped JSON value: built, dumped, loaded and checked for its required keys.

Usage: python3 reference.py map N | magi ROUNDS reused|new | push N | chain N | nested GROUPS ITEMS |
long N LINES.
Prints the case's count.
"""
import asyncio
import json
import sys


class Agent:
    def __init__(self, key):
        self.key = key
        self.turns = 0

    async def ask(self, prompt, required, build):
        await asyncio.sleep(0)
        self.turns += 1
        text = json.dumps(build(prompt))
        value = json.loads(text)
        for k in required:
            if k not in value:
                raise ValueError(f"{self.key}: answer lacks `{k}`")
        return value


def verdict(prompt):
    return {"verdict": "keep", "note": prompt}


def vote(prompt):
    return {"choice": "approve", "reason": prompt}


def reflect(prompt):
    return {"stance": "keep", "note": prompt}


async def map_case(n):
    gate = asyncio.Semaphore(16)

    async def one(i):
        async with gate:
            agent = Agent(f"a-{i}")
            return await agent.ask(f"Judge item {i}", ("verdict", "note"), verdict)

    out = await asyncio.gather(*(one(i) for i in range(n)))
    return len(out)


async def magi_case(rounds, new_agents):
    agents = [Agent(f"m{k}") for k in range(3)]
    wins = {}
    for r in range(rounds):
        if new_agents:
            agents = [Agent(f"m{r}-{k}") for k in range(3)]
        votes = await asyncio.gather(
            *(a.ask(f"Round {r}: vote on proposal {r}", ("choice", "reason"), vote) for a in agents)
        )
        shown = [v["choice"] for v in votes]
        await asyncio.gather(
            *(a.ask(f"Round {r}: the votes were {shown}; reflect", ("stance", "note"), reflect) for a in agents)
        )
        counts = {}
        for v in votes:
            counts[v["choice"]] = counts.get(v["choice"], 0) + 1
        best = max(counts, key=counts.get)
        wins[best] = wins.get(best, 0) + 1
    return sum(wins.values())


def step(prompt):
    return {"stance": "keep", "note": f"solo: {prompt}"[:50]}


async def chain_case(n):
    agent = Agent("solo")
    note = "start"
    for i in range(n):
        # A note cut short as the fake harness's is: echoing the prompt whole would grow it.
        note = (await agent.ask(f"Step {i}: continue from {note}", ("stance", "note"), step))["note"]
    return n


async def nested_case(groups, items):
    outer = asyncio.Semaphore(4)

    async def group(g):
        async with outer:
            inner = asyncio.Semaphore(4)

            async def one(i):
                async with inner:
                    agent = Agent(f"n-{g}-{i}")
                    return (await agent.ask(f"Judge item {i} of group {g}", ("verdict", "note"), verdict))["verdict"]

            return len(await asyncio.gather(*(one(i) for i in range(items))))

    return sum(await asyncio.gather(*(group(g) for g in range(groups))))


async def long_case(n, lines):
    gate = asyncio.Semaphore(16)
    doc = "".join(f"line {i}: the quick brown fox jumps over the lazy dog.\n" for i in range(lines))

    async def one(i):
        async with gate:
            agent = Agent(f"l-{i}")
            # The fake harness's note: the agent's key and the prompt's first eight words.
            answer = lambda p: {"verdict": "keep", "note": f"{agent.key}: " + " ".join(p.split(maxsplit=8)[:8])}
            prompt = f"Review item {i} against the document below.\n{doc}"
            return (await agent.ask(prompt, ("verdict", "note"), answer))["verdict"]

    return len(await asyncio.gather(*(one(i) for i in range(n))))


def push_case(n):
    a = []
    for i in range(n):
        a.append(f"item {i}")
    return len(a)


def main():
    case, n = sys.argv[1], int(sys.argv[2])
    if case == "map":
        print(asyncio.run(map_case(n)))
    elif case == "magi":
        print(asyncio.run(magi_case(n, sys.argv[3] == "new")))
    elif case == "push":
        print(push_case(n))
    elif case == "long":
        print(asyncio.run(long_case(n, int(sys.argv[3]))))
    elif case == "chain":
        print(asyncio.run(chain_case(n)))
    elif case == "nested":
        print(asyncio.run(nested_case(n, int(sys.argv[3]))))
    else:
        sys.exit(f"unknown case {case}")


main()
