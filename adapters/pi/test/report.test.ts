// What a run's report says to pi's user and to the model (src/report.ts).

import assert from "node:assert/strict";
import { test } from "node:test";
import type { Boundary, Report } from "../src/daemon.ts";
import { decidedBy, denialText, denied, granted, grantedLines, isFault, target } from "../src/report.ts";

function b(over: Partial<Boundary>): Boundary {
	return { attempt: 1, surface: "filesystem", operation: "write_file", path: "/var/lib/app/out", decision: "deny", source: "reviewer", ...over };
}

function report(bs: Boundary[] | null, over: Partial<Report> = {}): Report {
	return { exit_code: 0, attempts: 1, boundaries: bs, ...over };
}

test("decidedBy names who decided, for every source the broker gives", () => {
	const cases: [string, RegExp][] = [
		["policy", /your sandboxd policy/],
		["hard-deny", /fixed rules.*never granted/],
		["reviewer", /the model reviewer/],
		["human", /a person at the terminal/],
		["client", /a person, answering in pi/],
		["grant", /an earlier grant/],
		["circuit-breaker", /circuit breaker/],
		["no-reviewer", /nobody: no reviewer/],
		["error", /nobody: the reviewer failed/],
		["something-new", /^something-new$/],
		["", /^sandboxd$/],
	];
	for (const [source, want] of cases) assert.match(decidedBy(source), want, source);
});

test("isFault: only a failed or missing reviewer is a fault", () => {
	for (const s of ["error", "no-reviewer"]) assert.equal(isFault(s), true, s);
	for (const s of ["reviewer", "human", "policy", "hard-deny", "client", "grant", "circuit-breaker", ""]) assert.equal(isFault(s), false, s);
});

test("target names what a boundary touched", () => {
	assert.equal(target(b({})), "write_file /var/lib/app/out");
	assert.equal(target(b({ surface: "network", operation: "connect", path: undefined, destination: "example.org:443" })), "connect example.org:443");
	assert.equal(target(b({ operation: "exec", path: undefined })), "exec");
});

test("denialText is empty without denials", () => {
	assert.equal(denialText([]), "");
});

test("a deny names the target, who decided and why, and says rephrasing is denied too", () => {
	for (const [source, who] of [
		["reviewer", "the model reviewer"],
		["policy", "your sandboxd policy"],
		["hard-deny", "sandboxd's fixed rules"],
		["human", "a person at the terminal"],
		["client", "a person, answering in pi"],
		["circuit-breaker", "sandboxd's circuit breaker"],
	]) {
		const text = denialText([b({ source, rationale: "outside the task" })]);
		assert.match(text, /write_file \/var\/lib\/app\/out/, source);
		assert.ok(text.includes(`denied by ${who}`), `${source}: ${text}`);
		assert.match(text, /\(outside the task\)/, source);
		assert.match(text, /rephrasing it .* will be denied too/, source);
		assert.doesNotMatch(text, /No decision could be made/, source);
	}
});

test("a fault is told apart from a deny and not called a denial by a reviewer", () => {
	for (const source of ["error", "no-reviewer"]) {
		const text = denialText([b({ source, rationale: "the model did not answer" })]);
		assert.match(text, /No decision could be made/, source);
		assert.match(text, /not a denial by a reviewer/, source);
		assert.match(text, /write_file \/var\/lib\/app\/out: nobody/, source);
		assert.match(text, /the model did not answer/, source);
		assert.match(text, /sandboxd doctor/, source);
		assert.doesNotMatch(text, /denied by/, source);
		assert.doesNotMatch(text, /This command was denied/, source);
	}
});

test("denials and faults together: each in its own section", () => {
	const text = denialText([b({ source: "reviewer" }), b({ path: "/var/lib/app/other", source: "error" })]);
	const [deniedPart, faultPart] = text.split("[sandboxd] No decision could be made");
	assert.ok(faultPart !== undefined, text);
	assert.match(deniedPart, /\/var\/lib\/app\/out: denied by the model reviewer/);
	assert.doesNotMatch(deniedPart, /\/var\/lib\/app\/other/);
	assert.match(faultPart, /\/var\/lib\/app\/other: nobody: the reviewer failed/);
	assert.doesNotMatch(faultPart, /\/var\/lib\/app\/out/);
});

test("denied: every attempt's denials, duplicates collapsed, allows left out", () => {
	const rep = report([
		b({ attempt: 1 }),
		b({ attempt: 2 }), // the same boundary again on the retry
		b({ attempt: 1, decision: "allow" }),
		b({ attempt: 2, path: "/var/lib/app/b" }),
		b({ attempt: 2, surface: "network", operation: "connect", path: undefined, destination: "example.org:443" }),
	]);
	assert.deepEqual(denied(rep).map(target), ["write_file /var/lib/app/out", "write_file /var/lib/app/b", "connect example.org:443"]);
	assert.deepEqual(denied(report(null)), []);
	assert.deepEqual(denied(report([])), []);
});

test("granted: the allowed boundaries of attempt N only, duplicates collapsed", () => {
	const rep = report([
		b({ attempt: 1, decision: "allow", source: "reviewer" }),
		b({ attempt: 1, decision: "allow", source: "reviewer" }),
		b({ attempt: 1, decision: "allow", path: "/var/lib/app/b", source: "human" }),
		b({ attempt: 1, decision: "deny", path: "/var/lib/app/c" }),
		b({ attempt: 2, decision: "allow", path: "/var/lib/app/d" }),
	]);
	assert.deepEqual(granted(rep, 1).map(target), ["write_file /var/lib/app/out", "write_file /var/lib/app/b"]);
	assert.deepEqual(granted(rep, 2).map(target), ["write_file /var/lib/app/d"]);
	assert.deepEqual(granted(rep, 3), []);
	assert.deepEqual(granted(report(null), 1), []);
});

test("grantedLines say what was granted, by whom and why", () => {
	assert.deepEqual(
		grantedLines([
			b({ decision: "allow", source: "reviewer", rationale: "the build writes there" }),
			b({ decision: "allow", surface: "network", operation: "connect", path: undefined, destination: "proxy.golang.org:443", source: "human" }),
		]),
		[
			"write_file /var/lib/app/out — granted by the model reviewer: the build writes there",
			"connect proxy.golang.org:443 — granted by a person at the terminal",
		],
	);
});
