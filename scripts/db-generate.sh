#!/usr/bin/env bash
# Generates drizzle migrations for every service from its src/db/schema.ts (never hand-edit the output).
# Usage: npm run db:generate            (all services)
#        npm run db:generate -- pool    (one service)
set -euo pipefail
cd "$(dirname "$0")/.."
services=("$@")
[ ${#services[@]} -gt 0 ] || services=(registry pool placement execution billing)
for service in "${services[@]}"; do
  npx drizzle-kit generate --dialect postgresql \
    --schema "services/$service/src/db/schema.ts" \
    --out "services/$service/migrations"
done
