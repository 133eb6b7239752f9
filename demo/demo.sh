#!/bin/sh
# demo.sh SANDBOXD: run a few commands in a scratch workspace and show
# which cross the sandbox's boundary. Nothing outside the scratch
# directory is touched; the "secret" is a fake key in a scratch HOME.
set -u
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
# Beside the checkout, not under /tmp: the sandbox has a private /tmp.
top=$PWD
case "$top" in /tmp/*|/var/tmp/*) top=${XDG_CACHE_HOME:-$HOME/.cache} ;; esac
mkdir -p "$top/.demo" && base=$(mktemp -d "$top/.demo/run.XXXXXX") && chmod 755 "$base"
trap 'rm -rf "$base"; [ -n "${srv:-}" ] && kill $srv 2>/dev/null' EXIT INT TERM
ws="$base/workspace"; home="$base/home"; outside="$base/outside.txt"
mkdir -p "$ws" "$home/.ssh" && chmod 700 "$home"
echo "-----BEGIN FAKE KEY----- demo-secret" > "$home/.ssh/id_rsa" && chmod 600 "$home/.ssh/id_rsa"
echo "untouched" > "$outside"

# A server on the host's loopback that the sandbox must not reach.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 18765)
python3 -m http.server "$port" --bind 127.0.0.1 >/dev/null 2>&1 & srv=$!
sleep 0.3

# --reviewer off: the demo shows what the rules and hard denies decide;
# from a terminal, auto would ask you about each boundary instead.
run() {
	printf '\n\033[1m$ sandboxd run -c %s\033[0m\n' "'$1'"
	( cd "$ws" && HOME="$home" "$bin" run --reviewer off --report "$base/report.json" -c "$1" ); status=$?
	printf '  -> exit %d\n' "$status"
}

echo "workspace: $ws"
run 'echo hello > inside.txt && cat inside.txt'
run "echo changed > $outside"
run 'cat ~/.ssh/id_rsa'
run "exec 3<>/dev/tcp/127.0.0.1/$port && echo connected"
# The one way out is the run's proxy (HTTP_PROXY): each destination is a
# decision; with no rule and no reviewer, this one is refused.
run "curl -s -w ' (HTTP %{http_code})\\n' http://127.0.0.1:$port/"
run 'ls /proc | head -3; id'
# Workspace writes are held in a copy-on-write layer and committed after
# the command, minus anything that would run outside the sandbox later.
run 'echo "echo pwned" > .envrc && mkdir -p notes && echo kept > notes/todo.txt && echo done'
echo
printf 'after the runs: inside.txt = %s, outside.txt = %s, notes/todo.txt = %s, .envrc %s\n' \
	"$(cat "$ws/inside.txt" 2>/dev/null)" "$(cat "$outside")" "$(cat "$ws/notes/todo.txt" 2>/dev/null)" \
	"$([ -e "$ws/.envrc" ] && echo exists || echo 'was not committed')"
printf '\nthe last report (--report):\n'
cat "$base/report.json"
