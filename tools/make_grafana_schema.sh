#!/usr/bin/env bash
# Regenerate tests/schemas/grafana-dashboard.schema.json from Grafana's published TypeScript types.
# Needs node/npm and the npm registry; run only when moving to a newer Grafana schema.
set -euo pipefail
version="${1:-13.2.3}"
here="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
npm init -y >/dev/null
npm install --silent "@grafana/schema@$version" typescript ts-json-schema-generator >/dev/null
npx ts-json-schema-generator --path node_modules/@grafana/schema/dist/types/raw/dashboard/x/types.gen.d.ts \
  --type Dashboard --no-type-check -o dashboard.schema.json
python3 - "$version" "$here/tests/schemas/grafana-dashboard.schema.json" <<'PY'
import json, sys
s = json.load(open("dashboard.schema.json"))
s["$comment"] = (f"Generated from npm @grafana/schema {sys.argv[1]} (dist/types/raw/dashboard/x/types.gen.d.ts, type Dashboard) "
                 "with ts-json-schema-generator --no-type-check; regenerate with tools/make_grafana_schema.sh")
json.dump(s, open(sys.argv[2], "w"), indent=1, sort_keys=True)
PY
