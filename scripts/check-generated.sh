#!/usr/bin/env bash
# Proves the committed generated code and descriptor set match the protos: regenerates both and fails
# when git sees any difference (changed, deleted or new files).
set -euo pipefail
cd "$(dirname "$0")/.."
npx buf generate
npx buf build -o proto/descriptor/actor.binpb
if [ -n "$(git status --porcelain -- proto/gen proto/descriptor)" ]; then
  echo "generated code is out of date; run 'npm run proto:generate' and commit:" >&2
  git status --short -- proto/gen proto/descriptor >&2
  git --no-pager diff --stat -- proto/gen proto/descriptor >&2
  exit 1
fi
echo "generated code is up to date"
