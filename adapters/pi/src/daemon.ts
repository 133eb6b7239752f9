// The daemon's API as this package uses it: JSON over HTTP on the unix
// socket `sandboxd serve` listens on, with Node's own http (no runtime
// dependencies). The socket is trusted only when root owns it and every
// directory on the way, and nobody else may write them; the token file
// the daemon writes must be a private file of this user's. Both checks
// are the Go client's (daemon/client.go) but for the peer's uid, which
// Node cannot read from a socket: the path's checks are what keep
// another user's listener out.

import * as fs from "node:fs";
import * as http from "node:http";
import * as path from "node:path";

/** Where the daemon listens unless SANDBOXD_SOCKET says otherwise. */
export const DEFAULT_SOCKET = "/run/sandboxd/sandboxd.sock";

/** A failure whose message is safe to show, and whether the daemon
 * answered at all (down: false is a refusal with its message). */
export class DaemonError extends Error {
	readonly down: boolean;
	readonly status: number;
	readonly code: string;
	constructor(message: string, opts: { down?: boolean; status?: number; code?: string } = {}) {
		super(message);
		this.name = "DaemonError";
		this.down = opts.down ?? false;
		this.status = opts.status ?? 0;
		this.code = opts.code ?? "";
	}
}

/** Who a request is for and where: the daemon checks it against the peer. */
export interface Context {
	env: string[];
	cwd: string;
	umask: number;
	workspace?: string;
	policy?: string;
	session?: string;
	agent?: string;
	intent?: string;
	reviewer?: string;
}

export interface ExecRequest extends Context {
	argv: string[];
	command?: string;
	timeout_ms?: number;
	retries: number;
	retry?: "daemon" | "client";
	grants?: string[];
	questions?: boolean;
	require_isolation?: boolean;
}

export interface Decision {
	outcome: "allow" | "deny";
	risk_level?: string;
	user_authorization?: string;
	rationale: string;
	source: string;
}

export interface Boundary {
	attempt: number;
	surface: string;
	operation: string;
	path?: string;
	destination?: string;
	decision: "allow" | "deny";
	source: string;
	rationale?: string;
	grant?: string;
	held?: boolean;
}

export interface Report {
	exit_code: number;
	attempts: number;
	boundaries: Boundary[] | null;
	timed_out?: boolean;
	signal?: number;
	retry?: { grants: string[]; expires_in_ms: number };
	error?: string;
	workspace?: string;
}

export interface Question {
	id: string;
	surface: string;
	operation: string;
	path?: string;
	destination?: string;
	command: string;
	cwd: string;
	session?: string;
	intent?: string;
	held?: boolean;
	model?: Decision;
	/** Why an allow from this client would not stand ("" or absent: it would). */
	client_cannot_allow?: string;
	created_at: string;
	expires_at: string;
}

export interface ExecLine {
	type: "started" | "stdout" | "stderr" | "event" | "question" | "report" | string;
	exec?: string;
	question?: Question;
	data?: string; // base64
	event?: { kind: string; reason?: string; boundary?: Boundary; [k: string]: unknown };
	report?: Report;
	error?: string;
}

export interface ReviewRequest extends Context {
	command?: string;
	surface: string;
	operation: string;
	path?: string;
	destination?: string;
	grant?: boolean;
}

/** Largest answer read for a plain request (the daemon's own bound). */
const MAX_ANSWER = 1 << 20;

/** The daemon's answer must be JSON of an object; anything else is garbage. */
function parseObject(body: string, what: string): Record<string, unknown> {
	let v: unknown;
	try {
		v = JSON.parse(body);
	} catch {
		throw new DaemonError(`the daemon's answer to ${what} is not JSON`);
	}
	if (v === null || typeof v !== "object" || Array.isArray(v)) {
		throw new DaemonError(`the daemon's answer to ${what} is not a JSON object`);
	}
	return v as Record<string, unknown>;
}

/** trustedSocket throws unless p is a socket of root's reached only
 * through root's directories and links that nobody else may write. */
export function trustedSocket(p: string): string {
	if (!path.isAbsolute(p)) throw new DaemonError(`the daemon's socket ${p} is not an absolute path`, { down: true });
	p = path.normalize(p);
	const untrusted = (why: string) =>
		new DaemonError(`the daemon's socket ${p} is not trusted: ${why} (another user could have put it there)`, { down: true });
	try {
		for (let q = p; ; q = path.dirname(q)) {
			const st = fs.lstatSync(q);
			if (st.isSymbolicLink() && st.uid !== 0) throw untrusted(`${q} is a symlink that is not root's`);
			if (q === "/") break;
		}
		const real = fs.realpathSync(p);
		const st = fs.lstatSync(real);
		if (!st.isSocket() || st.uid !== 0) throw untrusted(`${real} is not a socket of root's`);
		for (let d = path.dirname(real); ; d = path.dirname(d)) {
			const ds = fs.lstatSync(d);
			if (ds.uid !== 0 || (ds.mode & 0o022) !== 0) throw untrusted(`${d} is not a directory only root may write`);
			if (d === "/") break;
		}
		return p;
	} catch (err) {
		if (err instanceof DaemonError) throw err;
		throw new DaemonError(`the daemon's socket ${p} cannot be reached: ${(err as Error).message}`, { down: true });
	}
}

/** readToken reads a token file that must be a private regular file of uid's. */
export function readToken(file: string, uid: number): string {
	let fd: number;
	try {
		fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
	} catch {
		throw new DaemonError("your daemon token file cannot be read");
	}
	try {
		const st = fs.fstatSync(fd);
		if (!st.isFile() || st.uid !== uid || (st.mode & 0o077) !== 0) {
			throw new DaemonError("your daemon token file is not a private file of yours");
		}
		const buf = Buffer.alloc(256);
		const n = fs.readSync(fd, buf, 0, buf.length, 0);
		return buf.subarray(0, n).toString("utf8").trim();
	} finally {
		fs.closeSync(fd);
	}
}

export interface ClientOptions {
	socket: string;
	uid: number;
	/** Bound on a plain request (not an exec), in milliseconds. */
	timeoutMs?: number;
}

/** Client talks to the daemon as the user running pi. */
export class Client {
	readonly socket: string;
	private readonly uid: number;
	private readonly timeoutMs: number;
	private token = "";

	constructor(opts: ClientOptions) {
		this.socket = opts.socket;
		this.uid = opts.uid;
		this.timeoutMs = opts.timeoutMs ?? 30_000;
	}

	/** connect checks the socket, has the daemon write this user's token
	 * file and reads it. */
	async connect(signal?: AbortSignal): Promise<void> {
		trustedSocket(this.socket);
		const out = await this.request("POST", "/v1/token", undefined, { signal });
		if (typeof out.path !== "string") throw new DaemonError("the daemon's answer to /v1/token names no file");
		this.token = readToken(out.path, this.uid);
	}

	get connected(): boolean {
		return this.token !== "";
	}

	/** request sends one JSON request and answers the JSON object of a 2xx. */
	request(
		method: string,
		route: string,
		body: unknown,
		opts: { signal?: AbortSignal; timeoutMs?: number } = {},
	): Promise<Record<string, unknown>> {
		return new Promise((resolve, reject) => {
			const payload = body === undefined ? undefined : Buffer.from(`${JSON.stringify(body)}\n`);
			const req = http.request({
				socketPath: this.socket,
				method,
				path: route,
				headers: this.headers(payload ? "application/json" : undefined),
				signal: opts.signal,
				timeout: opts.timeoutMs ?? this.timeoutMs,
			});
			req.on("timeout", () => req.destroy(new DaemonError(`the daemon did not answer ${route} in time`, { down: true })));
			req.on("error", (err) => reject(this.lost(asDaemonError(err, this.socket))));
			req.on("response", (res) => {
				const chunks: Buffer[] = [];
				let size = 0;
				res.on("data", (c: Buffer) => {
					size += c.length;
					if (size > MAX_ANSWER) {
						req.destroy(new DaemonError(`the daemon's answer to ${route} is too long`));
						return;
					}
					chunks.push(c);
				});
				res.on("error", (err) => reject(this.lost(asDaemonError(err, this.socket))));
				res.on("end", () => {
					const text = Buffer.concat(chunks).toString("utf8");
					const status = res.statusCode ?? 0;
					if (status < 200 || status > 299) {
						reject(this.lost(apiError(text, status)));
						return;
					}
					try {
						resolve(parseObject(text, route));
					} catch (err) {
						reject(err);
					}
				});
			});
			req.end(payload);
		});
	}

	/** exec runs req and hands each answer line to onLine as it comes; it
	 * resolves with the report. Aborting signal closes the connection,
	 * which ends the run's whole tree. */
	exec(req: ExecRequest, onLine: (l: ExecLine) => void, signal?: AbortSignal): Promise<Report> {
		return new Promise((resolve, reject) => {
			const hreq = http.request({
				socketPath: this.socket,
				method: "POST",
				path: "/v1/exec",
				headers: this.headers("application/x-ndjson"),
				signal,
			});
			let settled = false;
			const fail = (err: unknown) => {
				if (!settled) {
					settled = true;
					reject(err);
				}
			};
			hreq.on("error", (err) => fail(this.lost(asDaemonError(err, this.socket))));
			hreq.on("response", (res) => {
				const status = res.statusCode ?? 0;
				if (status !== 200) {
					const chunks: Buffer[] = [];
					res.on("data", (c: Buffer) => chunks.push(c));
					res.on("end", () => fail(this.lost(apiError(Buffer.concat(chunks).toString("utf8"), status))));
					return;
				}
				let pending = "";
				res.setEncoding("utf8");
				res.on("data", (chunk: string) => {
					pending += chunk;
					for (let nl = pending.indexOf("\n"); nl >= 0; nl = pending.indexOf("\n")) {
						const text = pending.slice(0, nl);
						pending = pending.slice(nl + 1);
						if (text.trim() === "") continue;
						let line: ExecLine;
						try {
							line = parseObject(text, "/v1/exec") as unknown as ExecLine;
						} catch (err) {
							hreq.destroy();
							fail(err);
							return;
						}
						if (line.type === "report") {
							if (!line.report || typeof line.report !== "object") {
								fail(new DaemonError(line.error || "the daemon's report is missing"));
							} else if (!settled) {
								settled = true;
								resolve(line.report);
							}
							return;
						}
						onLine(line);
					}
				});
				res.on("error", (err) => fail(this.lost(asDaemonError(err, this.socket))));
				res.on("end", () => fail(new DaemonError("the daemon's answer ended before the run's report")));
			});
			hreq.end(`${JSON.stringify(req)}\n`);
		});
	}

	/** signal forwards a signal (INT, TERM, ...) to the command of exec id. */
	async signal(id: string, sig: string): Promise<void> {
		await this.request("POST", `/v1/execs/${encodeURIComponent(id)}/signal`, { signal: sig });
	}

	/** decline ends a held attempt without its retry; answers its report. */
	async decline(grants: string[]): Promise<Report | undefined> {
		const out = await this.request("POST", "/v1/retries/decline", { grants });
		return (out.report as Report | undefined) ?? undefined;
	}

	/** review decides one boundary before anything runs. */
	async review(req: ReviewRequest, signal?: AbortSignal, timeoutMs?: number): Promise<Decision> {
		const out = await this.request("POST", "/v1/review", req, { signal, timeoutMs });
		return checkDecision(out.decision);
	}

	/** check says whether sandboxd's rules alone refuse a filesystem
	 * operation by a tool outside the sandbox. */
	async check(req: ReviewRequest, signal?: AbortSignal, timeoutMs?: number): Promise<{ denied: boolean; why: string }> {
		const out = await this.request("POST", "/v1/check", req, { signal, timeoutMs });
		if (typeof out.denied !== "boolean") throw new DaemonError("the daemon's answer to /v1/check says nothing");
		return { denied: out.denied, why: typeof out.why === "string" ? out.why : "" };
	}

	/** answer answers one of this user's questions, as a client. */
	async answer(id: string, allow: boolean, note?: string): Promise<void> {
		await this.request("POST", `/v1/questions/${encodeURIComponent(id)}/answer`, { allow, note: note ?? "" });
	}

	/** lost forgets the token when err says the daemon no longer takes
	 * it, or is no longer there (restarted, say): the next use connects
	 * again. A slow or garbled answer keeps it. */
	private lost(err: DaemonError): DaemonError {
		if (err.status === 401 || err.code === "ECONNREFUSED" || err.code === "ENOENT") this.token = "";
		return err;
	}

	private headers(contentType?: string): Record<string, string> {
		const h: Record<string, string> = {};
		if (this.token) h.Authorization = `Bearer ${this.token}`;
		if (contentType) h["Content-Type"] = contentType;
		return h;
	}
}

/** checkDecision is the broker's decision, or a DaemonError for garbage. */
export function checkDecision(v: unknown): Decision {
	const d = v as Partial<Decision> | null;
	if (
		!d ||
		typeof d !== "object" ||
		(d.outcome !== "allow" && d.outcome !== "deny") ||
		typeof d.source !== "string" ||
		(d.rationale !== undefined && typeof d.rationale !== "string")
	) {
		throw new DaemonError("the daemon's decision is malformed");
	}
	return { ...d, rationale: d.rationale ?? "" } as Decision;
}

function apiError(text: string, status: number): DaemonError {
	try {
		const e = JSON.parse(text) as { error?: { code?: unknown; message?: unknown } };
		if (e?.error && typeof e.error.message === "string" && e.error.message !== "") {
			return new DaemonError(`the daemon refused: ${e.error.message}`, {
				status,
				code: typeof e.error.code === "string" ? e.error.code : "",
			});
		}
	} catch {
		// fall through
	}
	return new DaemonError(`the daemon answered ${status}`, { status });
}

function asDaemonError(err: unknown, socket: string): DaemonError {
	if (err instanceof DaemonError) return err;
	const e = err as NodeJS.ErrnoException;
	if (e?.name === "AbortError") {
		const d = new DaemonError("aborted");
		d.name = "AbortError";
		return d;
	}
	return new DaemonError(`the daemon cannot be reached at ${socket}: ${e?.message ?? String(err)}`, { down: true, code: e?.code ?? "" });
}

/** umask reads this process's umask without changing it (/proc). */
export function currentUmask(): number {
	try {
		const m = /^Umask:\s*([0-7]+)$/m.exec(fs.readFileSync("/proc/self/status", "utf8"));
		if (m) return Number.parseInt(m[1], 8);
	} catch {
		// fall through
	}
	return 0o022;
}

/** envList is env as the daemon takes it: NAME=value, defined values only. */
export function envList(env: NodeJS.ProcessEnv): string[] {
	const out: string[] = [];
	for (const [k, v] of Object.entries(env)) {
		if (v !== undefined && k !== "" && !k.includes("=")) out.push(`${k}=${v}`);
	}
	return out;
}
