// The daemon's client (src/daemon.ts) against a fake daemon on a unix
// socket: trust in the socket and the token file, answers parsed,
// refusals and garbage told apart, timeouts, and exec's NDJSON stream.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as path from "node:path";
import { test } from "node:test";
import { Client, DaemonError, envList, type ExecLine, type ExecRequest, readToken, type Report, trustedSocket } from "../src/daemon.ts";
import { b64, FakeDaemon, json, line, ndjson, NEEDS_ROOT, sleep, tempDir } from "./fake-daemon.ts";

const uid = process.getuid?.() ?? -1;

function isDaemonError(re: RegExp, opts: { down?: boolean; status?: number; code?: string } = {}) {
	return (err: unknown) => {
		assert.ok(err instanceof DaemonError, `not a DaemonError: ${String(err)}`);
		assert.match(err.message, re);
		if (opts.down !== undefined) assert.equal(err.down, opts.down, `down: ${err.message}`);
		if (opts.status !== undefined) assert.equal(err.status, opts.status);
		if (opts.code !== undefined) assert.equal(err.code, opts.code);
		return true;
	};
}

/** withDaemon runs fn with a started fake daemon and a client of it. */
async function withDaemon(fn: (d: FakeDaemon, c: Client) => Promise<void>, opts: { timeoutMs?: number } = {}): Promise<void> {
	const d = await FakeDaemon.start();
	try {
		await fn(d, new Client({ socket: d.socket, uid, timeoutMs: opts.timeoutMs ?? 2_000 }));
	} finally {
		await d.stop();
	}
}

const REPORT: Report = { exit_code: 0, attempts: 1, boundaries: [] };

function execReq(over: Partial<ExecRequest> = {}): ExecRequest {
	return { argv: ["bash", "-c", "make"], command: "make", env: ["PATH=/usr/bin:/bin"], cwd: "/var/lib", umask: 0o022, retries: 1, retry: "client", ...over };
}

// ---- without a daemon: any user ----------------------------------------

test("trustedSocket: a relative path is refused", () => {
	assert.throws(() => trustedSocket("run/sandboxd.sock"), isDaemonError(/not an absolute path/, { down: true }));
});

test("trustedSocket: a socket that is missing is a daemon that is down", () => {
	const dir = tempDir("nosock");
	try {
		assert.throws(() => trustedSocket(path.join(dir, "sandboxd.sock")), isDaemonError(/cannot be reached/, { down: true }));
	} finally {
		fs.rmSync(dir, { recursive: true, force: true });
	}
});

test("trustedSocket: a socket under /tmp (mode 1777) is not trusted, whoever listens", async () => {
	// /tmp itself, not TMPDIR: the point is a directory anyone may write.
	assert.equal(fs.statSync("/tmp").mode & 0o1777, 0o1777, "/tmp is mode 1777 here");
	const dir = fs.mkdtempSync("/tmp/sandboxd-pi-sock-");
	const sock = path.join(dir, "sandboxd.sock");
	const server = net.createServer((c) => c.destroy());
	let connections = 0;
	server.on("connection", () => connections++);
	await new Promise<void>((resolve) => server.listen(sock, resolve));
	try {
		assert.throws(() => trustedSocket(sock), isDaemonError(/is not trusted/, { down: true }));
		const c = new Client({ socket: sock, uid, timeoutMs: 500 });
		await assert.rejects(c.connect(), isDaemonError(/is not trusted/, { down: true }));
		await sleep(20);
		assert.equal(connections, 0, "refused before any connect");
	} finally {
		await new Promise<void>((resolve) => server.close(() => resolve()));
		fs.rmSync(dir, { recursive: true, force: true });
	}
});

test("readToken: only a private regular file of the caller's", () => {
	const dir = tempDir("token");
	try {
		const file = (name: string, mode: number) => {
			const p = path.join(dir, name);
			fs.writeFileSync(p, "  secret-token\n", { mode });
			fs.chmodSync(p, mode);
			return p;
		};
		assert.equal(readToken(file("t600", 0o600), uid), "secret-token");
		assert.equal(readToken(file("t400", 0o400), uid), "secret-token");
		for (const mode of [0o644, 0o640, 0o604, 0o660, 0o602]) {
			assert.throws(() => readToken(file(`t${mode.toString(8)}`, mode), uid), isDaemonError(/not a private file of yours/), mode.toString(8));
		}
		assert.throws(() => readToken(file("other", 0o600), uid + 1), isDaemonError(/not a private file of yours/), "another uid's");
		const link = path.join(dir, "link");
		fs.symlinkSync(path.join(dir, "t600"), link);
		assert.throws(() => readToken(link, uid), isDaemonError(/cannot be read/), "a symlink, even to a good file");
		assert.throws(() => readToken(path.join(dir, "missing"), uid), isDaemonError(/cannot be read/));
		fs.mkdirSync(path.join(dir, "d"), { mode: 0o700 });
		assert.throws(() => readToken(path.join(dir, "d"), uid), isDaemonError(/not a private file/), "a directory");
	} finally {
		fs.rmSync(dir, { recursive: true, force: true });
	}
});

test("envList: defined NAME=value pairs only", () => {
	assert.deepEqual(envList({ A: "1", B: undefined, "": "x", "C=D": "y", E: "" }), ["A=1", "E="]);
});

// ---- against the fake daemon: root ------------------------------------

test("the token flow: POST /v1/token without a token, then the file's token on every request", { skip: NEEDS_ROOT }, async () => {
	await withDaemon(async (d, c) => {
		assert.equal(c.connected, false);
		await c.connect();
		assert.equal(c.connected, true);
		const [tok] = d.requests("POST", "/v1/token");
		assert.equal(tok.headers.authorization, undefined, "no token before the daemon wrote one");
		d.on("POST", "/v1/review", (res) => json(res, 200, { decision: { outcome: "allow", rationale: "", source: "policy" } }));
		await c.review({ env: [], cwd: "/", umask: 0o22, surface: "command", operation: "run", command: "true" });
		assert.equal(d.requests("POST", "/v1/review")[0].headers.authorization, `Bearer ${d.token}`);

		fs.chmodSync(d.tokenFile, 0o400);
		const c2 = new Client({ socket: d.socket, uid });
		await c2.connect();
		assert.equal(c2.connected, true, "a 0400 token file is private too");
	});
});

test("the token flow: a token file that is not private, a symlink, another user's, or none is refused", { skip: NEEDS_ROOT }, async () => {
	await withDaemon(async (d) => {
		const good = d.tokenFile;
		const cases: [string, () => void, RegExp][] = [
			["mode 0644", () => fs.chmodSync(good, 0o644), /not a private file of yours/],
			["owned by another uid", () => fs.chownSync(good, 65534, 65534), /not a private file of yours/],
			[
				"a symlink to a good file",
				() => {
					d.tokenFile = path.join(d.dir, "token-link");
					fs.symlinkSync(good, d.tokenFile);
				},
				/cannot be read/,
			],
			["missing", () => (d.tokenFile = path.join(d.dir, "no-such-token")), /cannot be read/],
		];
		for (const [name, spoil, want] of cases) {
			fs.chmodSync(good, 0o600);
			fs.chownSync(good, uid, uid);
			d.tokenFile = good;
			spoil();
			const c = new Client({ socket: d.socket, uid });
			await assert.rejects(c.connect(), isDaemonError(want), name);
			assert.equal(c.connected, false, name);
		}
		d.on("POST", "/v1/token", (res) => json(res, 200, { file: "/x" }));
		await assert.rejects(new Client({ socket: d.socket, uid }).connect(), isDaemonError(/names no file/));
		d.on("POST", "/v1/token", (res) => json(res, 403, { error: { code: "forbidden", message: "a sandboxed process may not ask" } }));
		await assert.rejects(new Client({ socket: d.socket, uid }).connect(), isDaemonError(/the daemon refused: a sandboxed process may not ask/, { status: 403 }));
	});
});

test("an untrusted socket is refused before any connect", { skip: NEEDS_ROOT }, async () => {
	await withDaemon(async (d) => {
		const link = path.join(d.dir, "link.sock");
		const file = path.join(d.dir, "file.sock");
		fs.writeFileSync(file, "");
		const cases: { name: string; socket: string; spoil: () => void; undo: () => void }[] = [
			{ name: "its directory mode 0777", socket: d.socket, spoil: () => fs.chmodSync(d.dir, 0o777), undo: () => fs.chmodSync(d.dir, 0o755) },
			{ name: "its directory group-writable", socket: d.socket, spoil: () => fs.chmodSync(d.dir, 0o775), undo: () => fs.chmodSync(d.dir, 0o755) },
			{ name: "its directory another uid's", socket: d.socket, spoil: () => fs.chownSync(d.dir, 65534, 65534), undo: () => fs.chownSync(d.dir, 0, 0) },
			{ name: "the socket another uid's", socket: d.socket, spoil: () => fs.lchownSync(d.socket, 65534, 65534), undo: () => fs.lchownSync(d.socket, 0, 0) },
			{
				name: "a symlink of another uid's to it",
				socket: link,
				spoil: () => {
					fs.symlinkSync(d.socket, link);
					fs.lchownSync(link, 65534, 65534);
				},
				undo: () => fs.rmSync(link),
			},
			{ name: "a regular file", socket: file, spoil: () => {}, undo: () => {} },
		];
		for (const c of cases) {
			c.spoil();
			try {
				await assert.rejects(new Client({ socket: c.socket, uid }).connect(), isDaemonError(/is not trusted/, { down: true }), c.name);
			} finally {
				c.undo();
			}
		}
		await sleep(20);
		assert.equal(d.connections, 0, "the fake daemon saw no connection");
		assert.deepEqual(d.seen, []);
		// The same socket, trusted again, and through root's own symlink.
		fs.symlinkSync(d.socket, link);
		await new Client({ socket: link, uid }).connect();
		assert.equal(d.requests("POST", "/v1/token").length, 1);
	});
});

test("a socket that is missing, or that nobody listens on any more: down", { skip: NEEDS_ROOT }, async () => {
	await withDaemon(async (d) => {
		await assert.rejects(new Client({ socket: path.join(d.dir, "gone.sock"), uid }).connect(), isDaemonError(/cannot be reached/, { down: true }));
		// A daemon that was killed leaves its socket file behind.
		const stale = path.join(d.dir, "stale.sock");
		const listener = `require("node:net").createServer().listen(${JSON.stringify(stale)}, () => process.kill(process.pid, "SIGKILL"))`;
		const killed = spawnSync(process.execPath, ["-e", listener], { timeout: 10_000 });
		assert.equal(killed.signal, "SIGKILL");
		assert.ok(fs.lstatSync(stale).isSocket(), "the stale socket is there");
		await assert.rejects(new Client({ socket: stale, uid }).connect(), isDaemonError(/cannot be reached at .*stale\.sock/, { down: true }));
	});
});

test("review and check: answers parsed, the request sent as one JSON line", { skip: NEEDS_ROOT }, async () => {
	await withDaemon(async (d, c) => {
		await c.connect();
		const decision = { outcome: "deny", risk_level: "high", user_authorization: "none", rationale: "it deletes the user's files", source: "reviewer" };
		d.on("POST", "/v1/review", (res) => json(res, 200, { decision }));
		d.on("POST", "/v1/check", (res) => json(res, 200, { denied: true, why: "a secret" }));
		const req = { env: ["HOME=/root"], cwd: "/var/lib", umask: 0o22, session: "s", agent: "pi", surface: "command", operation: "run", command: "rm -rf ~" };
		assert.deepEqual(await c.review(req), decision);
		const [sent] = d.requests("POST", "/v1/review");
		assert.equal(sent.headers["content-type"], "application/json");
		assert.ok(sent.body.endsWith("}\n"), "one line");
		assert.deepEqual(JSON.parse(sent.body), req);
		assert.deepEqual(await c.check({ ...req, surface: "filesystem", operation: "read_file", path: "/root/.ssh/id_ed25519" }), { denied: true, why: "a secret" });
		d.on("POST", "/v1/check", (res) => json(res, 200, { denied: false }));
		assert.deepEqual(await c.check(req), { denied: false, why: "" });
		d.on("POST", "/v1/check", (res) => json(res, 200, { denied: "no" }));
		await assert.rejects(c.check(req), isDaemonError(/says nothing/, { down: false }));
	});
});

test("a refusal {error: {code, message}} is a DaemonError 'the daemon refused: ...'", { skip: NEEDS_ROOT }, async () => {
	await withDaemon(async (d, c) => {
		await c.connect();
		const req = { env: [], cwd: "/", umask: 0o22, surface: "command", operation: "run", command: "true" };
		d.on("POST", "/v1/review", (res) => json(res, 400, { error: { code: "bad_request", message: "the directory does not exist" } }));
		await assert.rejects(c.review(req), isDaemonError(/^the daemon refused: the directory does not exist$/, { down: false, status: 400, code: "bad_request" }));
		d.on("POST", "/v1/review", (res) => json(res, 409, { error: { message: "answered already" } }));
		await assert.rejects(c.review(req), isDaemonError(/^the daemon refused: answered already$/, { status: 409, code: "" }));
		d.on("POST", "/v1/review", (res) => {
			res.writeHead(502);
			res.end("<html>bad gateway</html>");
		});
		await assert.rejects(c.review(req), isDaemonError(/^the daemon answered 502$/, { status: 502 }));
		d.on("POST", "/v1/review", (res) => json(res, 400, { error: { code: "x", message: "" } }));
		await assert.rejects(c.review(req), isDaemonError(/^the daemon answered 400$/));
		// Without the token: the fake daemon's own 401.
		await assert.rejects(new Client({ socket: d.socket, uid }).review(req), isDaemonError(/refused: your token is missing/, { status: 401 }));
	});
});

test("garbage answers are DaemonErrors", { skip: NEEDS_ROOT }, async () => {
	await withDaemon(async (d, c) => {
		await c.connect();
		const req = { env: [], cwd: "/", umask: 0o22, surface: "command", operation: "run", command: "true" };
		const garbage: [string, RegExp][] = [
			["not json", /is not JSON/],
			["", /is not JSON/],
			["[1,2]", /not a JSON object/],
			["null", /not a JSON object/],
			["42", /not a JSON object/],
			['"allow"', /not a JSON object/],
			["{}", /malformed/],
			['{"decision": {"outcome": "maybe", "rationale": "", "source": "reviewer"}}', /malformed/],
			['{"decision": {"outcome": "allow", "rationale": "", "source": 1}}', /malformed/],
			['{"decision": ["allow"]}', /malformed/],
		];
		for (const [body, want] of garbage) {
			d.on("POST", "/v1/review", (res) => {
				res.writeHead(200, { "Content-Type": "application/json" });
				res.end(body);
			});
			await assert.rejects(c.review(req), isDaemonError(want, { down: false }), JSON.stringify(body));
		}
		d.on("POST", "/v1/review", (res) => {
			res.writeHead(200, { "Content-Type": "application/json" });
			res.write('{"decision": "');
			res.end(`${"x".repeat((1 << 20) + 10)}"}`);
		});
		await assert.rejects(c.review(req), isDaemonError(/too long/), "an answer past the bound");
	});
});

test("a daemon that never answers: a DaemonError after timeoutMs", { skip: NEEDS_ROOT }, async () => {
	await withDaemon(
		async (d, c) => {
			await c.connect();
			d.on("POST", "/v1/review", () => {}); // never answers
			const req = { env: [], cwd: "/", umask: 0o22, surface: "command", operation: "run", command: "true" };
			let start = Date.now();
			await assert.rejects(c.review(req), isDaemonError(/did not answer \/v1\/review in time/, { down: true }));
			let took = Date.now() - start;
			assert.ok(took >= 90 && took < 1_500, `took ${took} ms`);
			// A call's own bound beats the client's.
			const patient = new Client({ socket: d.socket, uid, timeoutMs: 20_000 });
			await patient.connect();
			start = Date.now();
			await assert.rejects(patient.review(req, undefined, 30), isDaemonError(/in time/));
			took = Date.now() - start;
			assert.ok(took < 5_000, `the call's own bound: took ${took} ms`);
			const ac = new AbortController();
			setTimeout(() => ac.abort(), 20);
			await assert.rejects(c.review(req, ac.signal), (err: Error) => err.name === "AbortError" && err.message === "aborted");
		},
		{ timeoutMs: 100 },
	);
});

test("signal, decline and answer: their routes and bodies", { skip: NEEDS_ROOT }, async () => {
	await withDaemon(async (d, c) => {
		await c.connect();
		const final: Report = { exit_code: 3, attempts: 1, boundaries: [] };
		d.on("POST", "/v1/execs/ex%201/signal", (res) => json(res, 200, { sent: "INT" }));
		d.on("POST", "/v1/retries/decline", (res) => json(res, 200, { type: "report", report: final }));
		d.on("POST", "/v1/questions/q-9/answer", (res) => json(res, 200, { answered: true }));
		await c.signal("ex 1", "INT");
		assert.deepEqual(JSON.parse(d.requests("POST", "/v1/execs/ex%201/signal")[0].body), { signal: "INT" });
		assert.deepEqual(await c.decline(["g1", "g2"]), final);
		assert.deepEqual(JSON.parse(d.requests("POST", "/v1/retries/decline")[0].body), { grants: ["g1", "g2"] });
		await c.answer("q-9", false, "denied in pi");
		assert.deepEqual(JSON.parse(d.requests("POST", "/v1/questions/q-9/answer")[0].body), { allow: false, note: "denied in pi" });
		d.on("POST", "/v1/retries/decline", (res) => json(res, 409, { error: { code: "not_held", message: "no attempt waits on these grants" } }));
		await assert.rejects(c.decline(["g1"]), isDaemonError(/refused: no attempt waits/, { status: 409 }));
	});
});

// ---- exec ----------------------------------------------------------------

test("exec: NDJSON lines split across chunk boundaries, the report resolves", { skip: NEEDS_ROOT }, async () => {
	await withDaemon(async (d, c) => {
		await c.connect();
		const question = {
			id: "q-1",
			surface: "filesystem",
			operation: "write_file",
			path: "/var/lib/café/menu",
			command: "echo crème > /var/lib/café/menu",
			cwd: "/var/lib",
			created_at: "2026-01-01T00:00:00Z",
			expires_at: "2026-01-01T00:01:00Z",
		};
		const report: Report = { exit_code: 0, attempts: 1, boundaries: [{ attempt: 1, surface: "filesystem", operation: "write_file", path: "/var/lib/café/menu", decision: "allow", source: "client" }] };
		const lines = [
			{ type: "started", exec: "ex-1" },
			{ type: "stdout", data: b64("hello ") },
			{ type: "stderr", data: b64("warning: x\n") },
			{ type: "event", event: { kind: "boundary", reason: "write" } },
			{ type: "question", question },
			{ type: "stdout", data: b64("world\n") },
			{ type: "report", report },
		];
		const all = Buffer.from(lines.map(line).join(""));
		// Cut inside a line, right after a newline, inside a two-byte
		// character and before the last newline; then small pieces.
		const cuts = new Set<number>([5, all.indexOf("\n") + 1, all.indexOf("é") + 1, all.indexOf("è") + 1, all.length - 1]);
		for (let i = 0; i < all.length; i += 1 + (i % 13)) cuts.add(i);
		const at = [...cuts].filter((n) => n > 0 && n < all.length).sort((a, b) => a - b);
		d.on("POST", "/v1/exec", async (res) => {
			ndjson(res);
			let from = 0;
			for (const to of [...at, all.length]) {
				res.write(all.subarray(from, to));
				from = to;
				await sleep(1);
			}
			res.end();
		});
		const got: ExecLine[] = [];
		const rep = await c.exec(execReq(), (l) => got.push(l));
		assert.deepEqual(rep, report);
		assert.deepEqual(got, lines.slice(0, -1), "every line but the report, in order, intact");
		assert.equal(Buffer.from(got[1].data!, "base64").toString(), "hello ");
		const [sent] = d.requests("POST", "/v1/exec");
		assert.equal(sent.headers["content-type"], "application/x-ndjson");
		assert.equal(sent.headers.authorization, `Bearer ${d.token}`);
		assert.ok(sent.body.endsWith("}\n"));
		assert.deepEqual(JSON.parse(sent.body), execReq());
	});
});

test("exec: the lines of one chunk, and blank lines, are all read", { skip: NEEDS_ROOT }, async () => {
	await withDaemon(async (d, c) => {
		await c.connect();
		d.on("POST", "/v1/exec", (res) => {
			ndjson(res);
			res.end(`${line({ type: "started", exec: "e" })}\n\n${line({ type: "stdout", data: b64("a") })}${line({ type: "report", report: REPORT })}`);
		});
		const got: string[] = [];
		assert.deepEqual(await c.exec(execReq(), (l) => got.push(l.type)), REPORT);
		assert.deepEqual(got, ["started", "stdout"]);
	});
});

test("exec: a stream that ends before the report, a report line without one, garbage, a refusal", { skip: NEEDS_ROOT }, async () => {
	await withDaemon(async (d, c) => {
		await c.connect();
		const cases: [string, (res: import("node:http").ServerResponse) => void, RegExp, boolean][] = [
			["ends early", (res) => (ndjson(res), res.end(line({ type: "started", exec: "e" }) + line({ type: "stdout", data: b64("x") }))), /ended before the run's report/, false],
			["ends mid-line", (res) => (ndjson(res), res.end(`${line({ type: "started", exec: "e" })}{"type":"rep`)), /ended before the run's report/, false],
			["report without one", (res) => (ndjson(res), res.end(line({ type: "report", error: "the sandbox could not start" }))), /the sandbox could not start/, false],
			["report null", (res) => (ndjson(res), res.end(line({ type: "report", report: null }))), /report is missing/, false],
			["not JSON", (res) => (ndjson(res), res.write("this is not json\n")), /is not JSON/, true],
			["an array", (res) => (ndjson(res), res.write("[1]\n")), /not a JSON object/, true],
			["refused", (res) => json(res, 409, { error: { code: "busy", message: "too many runs of yours" } }), /^the daemon refused: too many runs of yours$/, false],
		];
		for (const [name, answer, want, cut] of cases) {
			const before = d.cutOff.length;
			d.on("POST", "/v1/exec", answer);
			await assert.rejects(c.exec(execReq(), () => {}), isDaemonError(want), name);
			if (cut) {
				// The client hangs up on garbage: the fake sees its answer cut off.
				for (let i = 0; i < 100 && d.cutOff.length === before; i++) await sleep(5);
				assert.equal(d.cutOff.length, before + 1, `${name}: connection closed`);
			}
		}
	});
});

test("exec: aborting the signal closes the connection", { skip: NEEDS_ROOT }, async () => {
	await withDaemon(async (d, c) => {
		await c.connect();
		d.on("POST", "/v1/exec", (res) => {
			ndjson(res);
			res.write(line({ type: "started", exec: "e" }));
			res.write(line({ type: "stdout", data: b64("working\n") })); // and never ends
		});
		const ac = new AbortController();
		const got: string[] = [];
		const run = c.exec(
			execReq(),
			(l) => {
				got.push(l.type);
				if (l.type === "stdout") ac.abort();
			},
			ac.signal,
		);
		await assert.rejects(run, (err: Error) => err.name === "AbortError");
		assert.equal(await d.cut(), "/v1/exec", "the fake daemon saw the connection close");
		assert.deepEqual(got, ["started", "stdout"]);
	});
});

test("exec: a daemon that stops mid-run is a DaemonError", { skip: NEEDS_ROOT }, async () => {
	await withDaemon(async (d, c) => {
		await c.connect();
		d.on("POST", "/v1/exec", (res) => {
			ndjson(res);
			res.write(line({ type: "started", exec: "e" }));
			setTimeout(() => res.socket?.destroy(), 10);
		});
		await assert.rejects(c.exec(execReq(), () => {}), (err: unknown) => err instanceof DaemonError);
	});
});

test("a daemon that no longer takes the token (restarted), or is gone: the client forgets it and connects again", { skip: NEEDS_ROOT }, async () => {
	await withDaemon(async (d, c) => {
		await c.connect();
		assert.equal(c.connected, true);
		const req = { env: [], cwd: "/", umask: 0o22, surface: "command", operation: "run", command: "true" };
		d.on("POST", "/v1/review", (res) => json(res, 401, { error: { code: "bad_token", message: "the request needs your token" } }));
		await assert.rejects(c.review(req), isDaemonError(/needs your token/, { status: 401 }));
		assert.equal(c.connected, false, "a refused token is forgotten");
		await c.connect();
		d.on("POST", "/v1/review", (res) => json(res, 400, { error: { code: "bad_request", message: "no" } }));
		await assert.rejects(c.review(req), isDaemonError(/refused: no/, { status: 400 }));
		assert.equal(c.connected, true, "another refusal keeps it");
		// Gone: nobody listens on the socket any more.
		await d.stop();
		await assert.rejects(c.review(req), isDaemonError(/cannot be reached/, { down: true }));
		assert.equal(c.connected, false, "a daemon that is gone: the token is forgotten");
	});
});
