// pi's BashOperations backed by sandboxd: each command runs in the
// sandbox through the daemon's exec, and the adapter drives the retry
// itself (retry "client"): when every boundary of the first attempt was
// allowed, it tells pi's user what was granted and by whom, presents the
// grants (the daemon consumes them against the objects as they are now)
// and runs the command once more. With no daemon it runs `sandboxd run`
// in process (embedded), never the bare command.

import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { currentUmask, DaemonError, envList, type Client, type ExecLine, type ExecRequest, type Question, type Report } from "./daemon.ts";
import { denialText, denied, granted, grantedLines, target } from "./report.ts";

/** The slice of pi's UI this uses (ctx.ui). */
export interface UI {
	select(title: string, options: string[], opts?: { signal?: AbortSignal; timeout?: number }): Promise<string | undefined>;
	notify(message: string, type?: "info" | "warning" | "error"): void;
}

/** What one run is for: pi's session, the person's request, pi's UI
 * when a person can be asked, and where the run's denials are kept for
 * the tool's result. */
export interface RunContext {
	sessionId: string;
	intent: string;
	ui?: UI;
	denials: { count: number; faults: number };
	/** The grants presented for the retry (consumed, or refused: spent
	 * either way), and what they granted. */
	retried: { grants: string[]; granted: string[] };
}

export interface ExecDeps {
	/** The connected daemon client, or why there is none. */
	daemon(): Promise<{ client: Client } | { down: string }>;
	/** The sandboxd binary for an embedded run. */
	sandboxd: string;
	retries: number;
	/** Says something to pi's user once per key. */
	warnOnce(key: string, message: string): void;
}

type OnData = (data: Buffer) => void;
export interface ExecOptions {
	onData: OnData;
	signal?: AbortSignal;
	timeout?: number;
	env?: NodeJS.ProcessEnv;
}

/** createOperations is pi's BashOperations for runs described by rc(). */
export function createOperations(deps: ExecDeps, rc: () => RunContext) {
	return {
		async exec(command: string, cwd: string, opts: ExecOptions): Promise<{ exitCode: number | null }> {
			if (opts.signal?.aborted) throw new Error("aborted");
			const run = rc();
			const got = await deps.daemon();
			if ("down" in got) {
				deps.warnOnce(
					"daemon-down",
					`sandboxd: the daemon is not running (${got.down}); commands run through \`sandboxd run\` in pi's process tree instead (embedded), still sandboxed`,
				);
				return runEmbedded(deps, run, command, cwd, opts);
			}
			return runThroughDaemon(deps, got.client, run, command, cwd, opts);
		},
	};
}

function isAbort(err: unknown, signal?: AbortSignal): boolean {
	return signal?.aborted === true || (err as Error)?.name === "AbortError";
}

async function runThroughDaemon(deps: ExecDeps, client: Client, run: RunContext, command: string, cwd: string, opts: ExecOptions) {
	const req: ExecRequest = {
		argv: ["bash", "-c", command],
		command,
		env: envList(opts.env ?? process.env),
		cwd,
		umask: currentUmask(),
		session: run.sessionId || undefined,
		agent: "pi",
		intent: run.intent || undefined,
		retries: deps.retries,
		retry: "client",
		questions: run.ui !== undefined,
	};
	// pi's timeout bounds the command, retry included.
	const deadline = opts.timeout === undefined ? undefined : Date.now() + opts.timeout * 1000;
	if (opts.timeout !== undefined) req.timeout_ms = Math.max(1, Math.round(opts.timeout * 1000));
	let rep = await attempt(client, run, req, opts);
	if (rep.retry && rep.retry.grants.length > 0) {
		const grants = rep.retry.grants;
		if (opts.signal?.aborted) {
			await client.decline(grants).catch(() => undefined);
			throw new Error("aborted");
		}
		const allowed = granted(rep, rep.attempts);
		run.retried.grants.push(...grants);
		run.retried.granted.push(...allowed.map(target));
		run.ui?.notify(`sandboxd granted, for one retry of this command:\n${grantedLines(allowed).map((l) => oneLine(l, 800)).join("\n")}`, "info");
		opts.onData(Buffer.from(`\n[sandboxd] retrying once with the access granted: ${allowed.map(target).join(", ")}\n`));
		const retry: ExecRequest = { ...req, grants };
		if (deadline !== undefined) {
			const left = deadline - Date.now();
			if (left <= 0) {
				await client.decline(grants).catch(() => undefined);
				throw new Error(`timeout:${opts.timeout}`);
			}
			retry.timeout_ms = Math.max(1, Math.round(left));
		}
		rep = await attempt(client, run, retry, opts);
	}
	return finish(run, rep, opts);
}

/** attempt is one exec: output streamed, questions asked in pi's UI. */
async function attempt(client: Client, run: RunContext, req: ExecRequest, opts: ExecOptions): Promise<Report> {
	const asking = new AbortController();
	const stop = () => asking.abort();
	opts.signal?.addEventListener("abort", stop, { once: true });
	try {
		return await client.exec(
			req,
			(l: ExecLine) => {
				if ((l.type === "stdout" || l.type === "stderr") && typeof l.data === "string") {
					opts.onData(Buffer.from(l.data, "base64"));
				} else if (l.type === "question" && l.question) {
					void askPerson(client, run, l.question, asking.signal);
				}
			},
			opts.signal,
		);
	} catch (err) {
		if (isAbort(err, opts.signal)) throw new Error("aborted");
		throw err;
	} finally {
		asking.abort();
		opts.signal?.removeEventListener("abort", stop);
	}
}

/** The answers a question offers, the safe one first. */
export const DENY = "Deny";
export const ALLOW = "Allow once";
export const DENY_NOW = "Deny now";
export const LEAVE_OPEN = "Leave it open";

/** askPerson asks pi's user one of the daemon's questions and relays
 * the answer as a client's. The daemon never lets a client's allow stand
 * for a critical boundary, or a high-risk one the person did not clearly
 * ask for: those the person can only deny from here (or leave open for a
 * person at the terminal). Unanswered, a question expires in the daemon,
 * which denies. */
async function askPerson(client: Client, run: RunContext, q: Question, signal: AbortSignal): Promise<void> {
	const ui = run.ui;
	if (!ui) return;
	const left = Date.parse(q.expires_at) - Date.now();
	const what = q.path || q.destination || q.command;
	// What the command, its files and the reviewer wrote is shown, never
	// obeyed: no control sequence reaches pi's UI, and each is one
	// bounded line, so none draws a line of its own ("Allow it once?",
	// another boundary) or pushes the boundary asked about out of sight.
	const lines = [`Command: ${oneLine(q.command, 600)}`, `Directory: ${oneLine(q.cwd, 300)}`];
	if (q.model) {
		const risk = q.model.risk_level ? ` (risk ${oneLine(q.model.risk_level, 20)})` : "";
		lines.push(`The model reviewer said ${oneLine(q.model.outcome, 20)}${risk}: ${oneLine(q.model.rationale, 700)}`);
	}
	lines.push(`It asks to ${oneLine(q.operation, 40)} ${oneLine(what, 400)}.`);
	const cannot = typeof q.client_cannot_allow === "string" ? q.client_cannot_allow : "";
	// A select whose first, highlighted option is the safe one: an Enter
	// meant for pi's editor never allows (pi's confirm highlights Yes).
	let options = [DENY, ALLOW];
	if (cannot) {
		lines.push(`An allow from pi cannot stand for this one (${oneLine(cannot, 200)}): deny it now, or leave it open for a person at your terminal until it expires.`);
		options = [DENY_NOW, LEAVE_OPEN];
	} else {
		lines.push("Allow it once?");
	}
	const opts = { signal, timeout: Number.isFinite(left) && left > 0 ? left : undefined };
	try {
		const title = `sandboxd: ${oneLine(q.operation, 40)} ${oneLine(what, 200)}`;
		const choice = await ui.select(`${title}\n${lines.join("\n")}`, options, opts);
		if (signal.aborted || choice === undefined || choice === LEAVE_OPEN || !options.includes(choice)) return;
		const allow = choice === ALLOW;
		await client.answer(q.id, allow, allow ? "" : "denied in pi");
	} catch (err) {
		// Answered elsewhere, withdrawn or expired: the daemon decides; a
		// refusal is the person's to read.
		if (err instanceof DaemonError && err.status === 403) ui.notify(`sandboxd: ${err.message}`, "warning");
	}
}

/** printable is text from a command, a path or a reviewer as pi's UI
 * may show it: every control character but a newline made visible. */
export function printable(text: string): string {
	return text.replace(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g, (c) => `\\u{${c.codePointAt(0)!.toString(16)}}`);
}

/** oneLine is text as one line of pi's UI: printable, its line breaks
 * shown as escapes, and at most max characters (its start and its end,
 * with how much was left out between). */
export function oneLine(text: string, max: number): string {
	const chars = Array.from(printable(String(text ?? "")).replace(/\n/g, "\\u{a}"));
	if (chars.length <= max) return chars.join("");
	const tail = Math.floor(max / 4);
	const head = max - tail;
	return `${chars.slice(0, head).join("")} … (${chars.length - max} characters left out) … ${chars.slice(-tail).join("")}`;
}

/** finish turns the final report into pi's result, adding what was
 * denied to the output the model reads (unless sandboxd run, embedded,
 * said it on its stderr already). */
function finish(run: RunContext, rep: Report, opts: ExecOptions, said = false): { exitCode: number } {
	if (rep.error) throw new Error(`sandboxd could not run the command: ${rep.error}`);
	const no = denied(rep);
	if (no.length > 0) {
		run.denials.count += no.length;
		run.denials.faults += no.filter((b) => b.source === "error" || b.source === "no-reviewer").length;
		if (!said) opts.onData(Buffer.from(`\n${denialText(no)}\n`));
	}
	if (rep.timed_out) throw new Error(`timeout:${opts.timeout}`);
	return { exitCode: rep.exit_code };
}

/** runEmbedded runs the command with `sandboxd run` (no daemon): its own
 * retry, the model reviewer if the user set one up, no person (it runs
 * in a session of its own, without pi's terminal). */
async function runEmbedded(deps: ExecDeps, run: RunContext, command: string, cwd: string, opts: ExecOptions) {
	const bin = sandboxdBinary(deps.sandboxd, opts.env ?? process.env, cwd);
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sandboxd-pi-"));
	try {
		const report = path.join(dir, "report.json");
		const args = ["run", "--no-daemon", "--agent", "pi", "--retries", String(deps.retries), "--report", report];
		if (run.intent) {
			const intent = path.join(dir, "intent");
			fs.writeFileSync(intent, run.intent, { mode: 0o600 });
			args.push("--intent-file", intent);
		}
		if (run.sessionId) args.push("--session", run.sessionId);
		if (opts.timeout !== undefined) args.push("--timeout", `${Math.max(1, Math.round(opts.timeout * 1000))}ms`);
		args.push("-c", command);
		const code = await spawnSandboxd(bin, args, cwd, opts);
		let rep: Report | undefined;
		try {
			rep = JSON.parse(fs.readFileSync(report, "utf8")) as Report;
		} catch {
			rep = undefined;
		}
		if (!rep) {
			throw new Error(`sandboxd run ended with status ${code} and no report: the command may not have run`);
		}
		return finish(run, rep, opts, true);
	} finally {
		fs.rmSync(dir, { recursive: true, force: true });
	}
}

/** sandboxdBinary is the sandboxd an embedded run for a command in cwd
 * starts: bin when it is an absolute path, else the first executable
 * file of that name in PATH's absolute directories. Never one the
 * agent's commands could have written: not through a relative or empty
 * PATH entry (PATH=":/usr/bin", an easy slip), which names the command's
 * directory, and nothing in the project pi works in (a PATH entry such
 * as direnv's PATH_add bin, a link there to /bin/sh), where the
 * sandboxed commands write: a sandboxd they left there would run the
 * next command bare. */
export function sandboxdBinary(bin: string, env: NodeJS.ProcessEnv, cwd: string): string {
	const root = projectRoot(cwd);
	const inProject = (p: string) => within(path.resolve(p), root) || within(realpath(p), root);
	if (path.isAbsolute(bin)) {
		if (inProject(bin)) {
			throw new DaemonError(`SANDBOXD_BIN (${bin}) is in the project pi works in (${root}), where the agent's commands may rewrite it: the command was not run`);
		}
		return bin;
	}
	if (bin.includes("/")) {
		throw new DaemonError(`SANDBOXD_BIN (${bin}) must be an absolute path or a name on PATH: the command was not run`);
	}
	for (const d of (env.PATH ?? "").split(":")) {
		if (!path.isAbsolute(d) || inProject(d)) continue;
		const p = path.join(d, bin);
		try {
			fs.accessSync(p, fs.constants.X_OK);
			if (fs.statSync(p).isFile() && !inProject(p)) return p;
		} catch {
			// not here
		}
	}
	throw new DaemonError(
		`sandboxd is not installed where pi looks (${bin}, in PATH's absolute directories outside the project; set SANDBOXD_BIN): the command was not run`,
	);
}

/** projectRoot is the project a command in cwd works in, as far as its
 * commands may write: the nearest directory with a .git from cwd up,
 * else cwd (its links resolved). */
function projectRoot(cwd: string): string {
	const start = realpath(cwd);
	for (let d = start; ; d = path.dirname(d)) {
		if (fs.existsSync(path.join(d, ".git"))) return d;
		if (d === path.dirname(d)) return start;
	}
}

function realpath(p: string): string {
	try {
		return fs.realpathSync(p);
	} catch {
		return path.resolve(p);
	}
}

function within(p: string, dir: string): boolean {
	return p === dir || p.startsWith(dir === "/" ? "/" : `${dir}/`);
}

function spawnSandboxd(bin: string, args: string[], cwd: string, opts: ExecOptions): Promise<number | null> {
	return new Promise((resolve, reject) => {
		const child = spawn(bin, args, {
			cwd,
			env: opts.env ?? process.env,
			detached: true, // a session of its own: no controlling terminal to ask on
			stdio: ["ignore", "pipe", "pipe"],
		});
		let killTimer: NodeJS.Timeout | undefined;
		const onAbort = () => {
			if (child.pid === undefined) return;
			// sandboxd forwards the signal to the command's tree, then
			// commits; a tree that ignores it is killed with sandboxd.
			try {
				process.kill(-child.pid, "SIGTERM");
			} catch {
				// gone
			}
			killTimer = setTimeout(() => {
				try {
					process.kill(-child.pid!, "SIGKILL");
				} catch {
					// gone
				}
			}, 3000);
		};
		opts.signal?.addEventListener("abort", onAbort, { once: true });
		child.stdout.on("data", opts.onData);
		child.stderr.on("data", opts.onData);
		child.on("error", (err: NodeJS.ErrnoException) => {
			opts.signal?.removeEventListener("abort", onAbort);
			reject(
				new DaemonError(
					err.code === "ENOENT"
						? `sandboxd is not installed where pi looks (${bin}; set SANDBOXD_BIN): the command was not run`
						: `sandboxd could not be started: ${err.message}; the command was not run`,
				),
			);
		});
		child.on("close", (code, sig) => {
			clearTimeout(killTimer);
			opts.signal?.removeEventListener("abort", onAbort);
			if (opts.signal?.aborted) {
				reject(new Error("aborted"));
				return;
			}
			resolve(code ?? (sig ? 128 + (os.constants.signals[sig] ?? 0) : null));
		});
	});
}
