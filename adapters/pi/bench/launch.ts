// What one bash command costs pi with this package, side by side in one
// interleaved run: pi's own local bash (no sandbox), bubblewrap, the
// package through a daemon of the benchmark's own, and the package
// embedded (`sandboxd run` when no daemon answers). Run as root (the
// daemon's socket must be root's), with pi's Node:
//
//   node adapters/pi/bench/launch.ts --sandboxd bin/sandboxd \
//     --pi /path/to/node_modules/@earendil-works/pi-coding-agent [-n 60]

import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { Client } from "../src/daemon.ts";
import { createOperations, type RunContext } from "../src/exec.ts";

type Exec = () => Promise<unknown>;

const { values } = parseArgs({
	options: { sandboxd: { type: "string" }, pi: { type: "string" }, n: { type: "string", default: "60" } },
});
if (!values.sandboxd || !values.pi || process.getuid?.() !== 0) {
	console.error("usage (as root): node adapters/pi/bench/launch.ts --sandboxd BIN --pi PI_PACKAGE_DIR [-n N]");
	process.exit(2);
}
const n = Number.parseInt(values.n ?? "60", 10);
const sandboxd = path.resolve(values.sandboxd);
const root = fs.mkdtempSync("/run/sandboxd-pi-bench-");
fs.chmodSync(root, 0o755);
const ws = fs.mkdtempSync("/var/lib/sandboxd-pi-bench-ws-");
const socket = path.join(root, "sandboxd.sock");
const env = { PATH: "/usr/local/bin:/usr/bin:/bin", HOME: process.env.HOME ?? "/root", LANG: "C.UTF-8" };

const daemon = spawn(sandboxd, ["serve", "--socket", socket], { stdio: "ignore" });
for (let i = 0; i < 200 && !fs.existsSync(socket); i++) await new Promise((r) => setTimeout(r, 25));

const pi = (await import(pathToFileURL(path.join(values.pi, "dist", "index.js")).href)) as {
	createLocalBashOperations(): { exec: (c: string, cwd: string, o: object) => Promise<unknown> };
};
const local = pi.createLocalBashOperations();
const run = (): RunContext => ({ sessionId: "bench", intent: "", denials: { count: 0, faults: 0 }, retried: { grants: [], granted: [] } });
const warnOnce = () => {};
const client = new Client({ socket, uid: 0 });
await client.connect();
const viaDaemon = createOperations({ daemon: async () => ({ client }), sandboxd, retries: 1, warnOnce }, run);
const embedded = createOperations({ daemon: async () => ({ down: "benchmark" }), sandboxd, retries: 1, warnOnce }, run);
const bwrap = spawnSync("sh", ["-c", "command -v bwrap"], { encoding: "utf8" }).stdout.trim();
const opts = { onData: () => {}, env };

const contenders: { name: string; exec: Exec; times: number[] }[] = [
	{ name: "pi's own bash: `true` (no sandbox)", exec: () => local.exec("true", ws, opts), times: [] },
	{
		name: "`bwrap --unshare-all ... true`",
		exec: () =>
			new Promise((resolve, reject) => {
				const c = spawn(bwrap, ["--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--bind", ws, ws, "--dev", "/dev", "--proc", "/proc", "true"]);
				c.on("error", reject).on("close", resolve);
			}),
		times: [],
	},
	{ name: "this package, through the daemon", exec: () => viaDaemon.exec("true", ws, opts), times: [] },
	{ name: "this package, embedded (`sandboxd run`)", exec: () => embedded.exec("true", ws, opts), times: [] },
];

try {
	for (const c of contenders) await c.exec(); // warm each once
	for (let i = 0; i < n; i++) {
		for (const c of contenders) {
			const start = performance.now();
			await c.exec();
			c.times.push(performance.now() - start);
		}
	}
} finally {
	daemon.kill("SIGTERM");
	await new Promise((r) => daemon.on("close", r));
	fs.rmSync(root, { recursive: true, force: true });
	fs.rmSync(ws, { recursive: true, force: true });
}

const q = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))];
const base = q(contenders[1].times, 0.5);
console.log("| command | runs | median | p10 | p90 | median / bwrap |\n|---|---|---|---|---|---|");
for (const c of contenders) {
	const [m, p10, p90] = [q(c.times, 0.5), q(c.times, 0.1), q(c.times, 0.9)];
	console.log(`| ${c.name} | ${c.times.length} | ${m.toFixed(2)} ms | ${p10.toFixed(2)} ms | ${p90.toFixed(2)} ms | ${(m / base).toFixed(2)} |`);
}
