# shellcheck shell=sh
# Sourced by the PyTorch tests: sets $python to the first of python3, /usr/bin/python3 that can
# import torch and numpy, or exits 77 (CTest: skipped) with the reason. With torch_optional=1 set
# before, a test whose PyTorch part is optional gets $python empty instead of the exit.
python=""
for candidate in python3 /usr/bin/python3; do
  if "$candidate" -c "import torch, numpy" 2>/dev/null; then python=$candidate; break; fi
done
if [ -z "$python" ] && [ "${torch_optional:-0}" != 1 ]; then
  echo "skipped: no PyTorch with numpy for python3 or /usr/bin/python3 (tools/peers/install.sh)"
  exit 77
fi
