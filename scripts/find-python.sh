#!/usr/bin/env bash
# Print an interpreter >= 3.12 for the host venv, or exit 1.
# pyenv shims exist for versions that are not active and then fail, so each
# candidate is actually run rather than merely looked up.
for c in "${PYTHON:-}" python3.13 python3.12 python3 \
         /root/.pyenv/versions/3.13*/bin/python3.13 /root/.pyenv/versions/3.12*/bin/python3.12 \
         "$HOME"/.pyenv/versions/3.13*/bin/python3.13 "$HOME"/.pyenv/versions/3.12*/bin/python3.12 \
         /usr/local/bin/python3.13 /usr/bin/python3.13 /usr/bin/python3.12; do
  [ -n "$c" ] || continue
  if path=$("$c" -c 'import sys; assert sys.version_info >= (3, 12); print(sys.executable)' 2>/dev/null); then
    echo "$path"; exit 0
  fi
done
exit 1
