# sandboxd: two commands for a fresh Debian/Ubuntu machine with Go.
#   make demo   builds sandboxd (its front, embedded run, core and helper) and shows a sandboxed command hitting its boundaries
#   make test   runs every test (as root it also runs them as an unprivileged user),
#               keeps go test's JSON events in bin/test.json and ends with the ten slowest

GO       ?= go
BIN      := bin/sandboxd
TESTUSER := sandboxd-test
# Debian packages the build and the tests need (socat: Claude Code's own
# sandbox, which the agent tests turn on, needs it with bubblewrap;
# iptables and nftables: the owner-match rules that show the daemon
# connects as its caller; prometheus: promtool, which checks
# deploy/alerts.yml; systemd: systemd-analyze, which checks deploy/'s
# units offline; tmux: drives pi's terminal UI in the pi package's tests).
BUILD_PKGS := libseccomp-dev gcc pkg-config
TEST_PKGS  := $(BUILD_PKGS) git python3 attr libcap2-bin bubblewrap python3-pytest procps less make \
              curl python3-pip iproute2 util-linux openssh-server openssh-client netcat-openbsd \
              mercurial ruby sqlite3 inotify-tools openssl python3-venv socat iptables nftables prometheus systemd tmux
# The demo also fetches through the run's proxy.
DEMO_PKGS  := $(BUILD_PKGS) python3 curl
# The everyday-command corpus also runs node and npm (Debian's, unless a
# node with its own npm is installed already).
NODE_PKGS  := nodejs npm
# go test's flags for `make test`: vet ran just before (a superset of the
# checks go test would run again); -parallel 8 lets the integration
# tests that wait on processes and timers overlap on a 2-core machine.
TESTFLAGS := -count=1 -timeout 25m -vet=off -parallel 8
# Tools whose configuration files the persistence tests plant, from npm.
NPM_TOOLS  := yarn=yarn@1.22.22 pnpm=pnpm@10.34.9

.PHONY: demo test build deps test-deps test-user bench clean

# Four programs, stamped alike with one fresh value per build, to be
# installed together: sandboxd, the lean front people and agents run
# (cmd/sandboxd-front: `sandboxd run` through the daemon itself, another
# run handed to sandboxd-run and every other command line to the core, in
# its place); sandboxd-run, the lean embedded run (cmd/sandboxd-run: no
# model client, Prometheus, MCP or daemon linked; it asks the core for
# the model reviewer's prompts); sandboxd-core, the whole of sandboxd
# (cmd/sandboxd), which, as sandboxd-run, refuses a front of another
# build; and the lean helper (cmd/sandboxd-helper), which the core runs
# in each sandbox instead of itself, and which refuses any core but its
# own build's.
CORE     := bin/sandboxd-core
HELPER   := bin/sandboxd-helper
RUN      := bin/sandboxd-run
STAMP    := $(shell od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
LDFLAGS  := -X github.com/sandboxd/sandboxd/sandbox/internal/wire.stamp=$(STAMP)

# The front and the helper start at every launch and link no C (the
# helper installs a seccomp program the core compiled; libseccomp is the
# core's), so they are built static: no dynamic loader, libc or
# libseccomp loaded at each start (1.3 ms a start measured, BENCHMARKS),
# and psx restricts the helper's threads with the runtime's own
# AllThreadsSyscall instead of its cgo wrapper.
build: deps
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(CORE) ./cmd/sandboxd
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(RUN) ./cmd/sandboxd-run
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS) -X main.stamp=$(STAMP)' -o $(BIN) ./cmd/sandboxd-front
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(HELPER) ./cmd/sandboxd-helper

demo: build
	@./demo/ensure-packages.sh $(DEMO_PKGS)
	@./demo/demo.sh $(BIN)

test: test-deps test-user
	@unformatted=$$(gofmt -l .); if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	@mkdir -p bin
	$(GO) build -o bin/testreport ./internal/cmd/testreport
	./bin/testreport -go $(GO) -json bin/test.json -- $(TESTFLAGS) ./...

bench: test-deps build
	$(GO) run ./bench/launch -n 200

deps:
	@./demo/ensure-packages.sh $(BUILD_PKGS)

test-deps:
	@./demo/ensure-packages.sh $(TEST_PKGS)
	@command -v npm >/dev/null 2>&1 || ./demo/ensure-packages.sh $(NODE_PKGS)
	@./demo/ensure-npm-tools.sh $(NPM_TOOLS)

# The integration tests run every case again as this unprivileged user.
test-user:
	@if [ "$$(id -u)" = 0 ] && ! id -u $(TESTUSER) >/dev/null 2>&1; then \
		echo "creating the unprivileged test user $(TESTUSER)"; \
		useradd --system --create-home --shell /bin/bash $(TESTUSER); \
	fi

clean:
	rm -rf bin
