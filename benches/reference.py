"""The reference beside awf in `cargo bench --bench engine`: the same fan-out in bare asyncio, with
no records. An "agent" is an object whose turn yields once (the model call's suspension point) and
then answers one schema-shaped JSON value: built, dumped, loaded and checked for its required keys.

Usage: python3 reference.py map N | magi ROUNDS reused|new | push N. Prints the case's count.
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
    else:
        sys.exit(f"unknown case {case}")


main()
