#!/bin/sh
# ensure-packages.sh PKG...: install missing Debian packages when root,
# otherwise print the exact command and fail.
set -eu
missing=""
for p in "$@"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ]; then
	echo "installing:$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y --no-install-recommends $missing >/dev/null 2>&1 || {
		apt-get update >/dev/null && apt-get install -y --no-install-recommends $missing >/dev/null
	}
else
	echo "sandboxd needs these Debian packages:$missing" >&2
	echo "install them with: sudo apt-get install -y$missing" >&2
	exit 1
fi
