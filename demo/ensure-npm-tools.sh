#!/bin/sh
# ensure-npm-tools.sh CMD=PACKAGE@VERSION...: install missing command-line
# tools from the npm registry when root (globally, as Debian's npm
# does), otherwise print the exact command. The tests that need them
# skip, saying why, when they are missing.
set -eu
missing=""
for spec in "$@"; do
	cmd=${spec%%=*}
	command -v "$cmd" >/dev/null 2>&1 || missing="$missing ${spec#*=}"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v npm >/dev/null 2>&1; then
	echo "installing from npm:$missing"
	npm install -g --no-audit --no-fund --loglevel=error $missing >/dev/null
else
	echo "some tests skip without these npm packages:$missing" >&2
	echo "install them with: sudo npm install -g$missing" >&2
fi
