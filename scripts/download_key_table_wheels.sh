#!/usr/bin/env bash
# The wheels scripts/native_flag_tables.py reads (no dependencies; only these files).
# Usage: scripts/download_key_table_wheels.sh /tmp/wheels
set -euo pipefail
out=${1:?usage: $0 FOLDER}
pip=${PIP:-.venv/bin/pip}
get() { "$pip" download -q --no-deps -d "$out/$1" "$2"; }
for v in 0.14.0 0.15.2 0.16.1 0.17.0 0.18.2 0.19.1 0.20.0 0.21.0 0.22.2 0.23.1 0.24.0 0.25.1 0.26.2 \
         0.27.2 0.28.0 0.29.1 1.0.0 1.4.0 1.8.0 1.12.0 1.16.0; do get trl "trl==$v"; done
for v in 4.46.3 4.51.3 4.56.2 5.0.0 5.24.0; do get transformers "transformers==$v"; done
for v in 3.2.2 3.3.1 3.4.1 3.5.3 3.6.4 3.7.3 3.8.3 3.9.3 3.10.3 3.11.3 3.12.6 4.0.4 4.3.2 4.6.0; do get swift "ms-swift==$v"; done
for v in 0.3.0.post1 0.4.1 0.5.0 0.6.1 0.7.1 0.8.0 0.9.1; do get verl "verl==$v"; done
for v in 0.5.9.post1 0.6.4 0.7.5 0.8.11 0.9.10 0.10.1 0.11.2; do get openrlhf "openrlhf==$v"; done
