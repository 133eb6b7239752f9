// A fake sandboxd daemon for the unit tests: Node's own HTTP server on a
// unix socket, answering the routes a test sets up and recording what
// it was sent. The client trusts a socket only when root owns it and
// every directory above it, so the fake runs only as root, in a fresh
// root-owned 0755 directory under /run (not /tmp: mode 1777, which the
// client rightly refuses).

import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as http from "node:http";
import * as os from "node:os";
import * as path from "node:path";

/** Why a test that needs the fake daemon is skipped, or false. */
export const NEEDS_ROOT: string | false =
	process.getuid?.() === 0 ? false : "the fake daemon's socket must be root's for the client to trust it (run as root)";

/** tempDir is a fresh private directory for a test's files: under
 * /var/lib as root; else the user's temporary directory (nothing of
 * these tests runs in a sandbox, so a private /tmp does not matter). */
export function tempDir(name: string): string {
	const base = process.getuid?.() === 0 ? "/var/lib" : os.tmpdir();
	return fs.mkdtempSync(path.join(base, `sandboxd-pi-${name}-`));
}

export interface Seen {
	method: string;
	url: string;
	headers: http.IncomingHttpHeaders;
	body: string;
}

export type Handler = (res: http.ServerResponse, body: string, req: http.IncomingMessage) => void | Promise<void>;

export class FakeDaemon {
	readonly dir: string;
	readonly socket: string;
	readonly token = crypto.randomBytes(16).toString("hex");
	/** Where POST /v1/token points the client. */
	tokenFile: string;
	/** Every request the daemon read, in order. */
	readonly seen: Seen[] = [];
	/** How many connections it accepted. */
	connections = 0;
	/** The URLs of responses the client closed before they ended. */
	readonly cutOff: string[] = [];
	private readonly routes = new Map<string, Handler>();
	private readonly waiters: { pred: (s: Seen) => boolean; resolve: (s: Seen) => void }[] = [];
	private readonly cutWaiters: ((url: string) => void)[] = [];
	private readonly server: http.Server;

	private constructor() {
		this.dir = fs.mkdtempSync("/run/sandboxd-pi-tests-");
		fs.chmodSync(this.dir, 0o755);
		this.socket = path.join(this.dir, "sandboxd.sock");
		this.tokenFile = path.join(this.dir, "token");
		fs.writeFileSync(this.tokenFile, `${this.token}\n`, { mode: 0o600 });
		this.on("POST", "/v1/token", (res) => json(res, 200, { path: this.tokenFile }));
		this.server = http.createServer((req, res) => void this.serve(req, res));
		this.server.on("connection", () => this.connections++);
	}

	static async start(): Promise<FakeDaemon> {
		const d = new FakeDaemon();
		await new Promise<void>((resolve, reject) => {
			d.server.once("error", reject);
			d.server.listen(d.socket, () => resolve());
		});
		return d;
	}

	/** on answers method path with handler (the last one set wins). */
	on(method: string, route: string, handler: Handler): void {
		this.routes.set(`${method} ${route}`, handler);
	}

	/** next resolves with the first request (seen or to come) pred takes. */
	next(pred: (s: Seen) => boolean): Promise<Seen> {
		const got = this.seen.find(pred);
		if (got) return Promise.resolve(got);
		return new Promise((resolve) => this.waiters.push({ pred, resolve }));
	}

	/** cut resolves when the client closes a response before its end. */
	cut(): Promise<string> {
		if (this.cutOff.length > 0) return Promise.resolve(this.cutOff[0]);
		return new Promise((resolve) => this.cutWaiters.push(resolve));
	}

	requests(method: string, route: string): Seen[] {
		return this.seen.filter((s) => s.method === method && s.url === route);
	}

	async stop(): Promise<void> {
		this.server.closeAllConnections();
		await new Promise<void>((resolve) => this.server.close(() => resolve()));
		fs.rmSync(this.dir, { recursive: true, force: true });
	}

	private async serve(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
		const chunks: Buffer[] = [];
		for await (const c of req) chunks.push(c as Buffer);
		const s: Seen = { method: req.method ?? "", url: req.url ?? "", headers: req.headers, body: Buffer.concat(chunks).toString("utf8") };
		this.seen.push(s);
		for (let i = this.waiters.length - 1; i >= 0; i--) {
			if (this.waiters[i].pred(s)) this.waiters.splice(i, 1)[0].resolve(s);
		}
		res.on("close", () => {
			if (res.writableFinished) return;
			this.cutOff.push(s.url);
			for (const w of this.cutWaiters.splice(0)) w(s.url);
		});
		const handler = this.routes.get(`${s.method} ${s.url}`);
		if (!handler) {
			json(res, 404, { error: { code: "not_found", message: "no such route" } });
			return;
		}
		if (s.url !== "/v1/token" && s.headers.authorization !== `Bearer ${this.token}`) {
			json(res, 401, { error: { code: "unauthorized", message: "your token is missing or wrong" } });
			return;
		}
		await handler(res, s.body, req);
	}
}

/** json answers v with status, as the daemon does. */
export function json(res: http.ServerResponse, status: number, v: unknown): void {
	res.writeHead(status, { "Content-Type": "application/json" });
	res.end(`${JSON.stringify(v)}\n`);
}

/** ndjson starts an exec's answer: 200, one JSON object a line. */
export function ndjson(res: http.ServerResponse): void {
	res.writeHead(200, { "Content-Type": "application/x-ndjson" });
	res.flushHeaders();
}

export function line(v: unknown): string {
	return `${JSON.stringify(v)}\n`;
}

export function b64(s: string): string {
	return Buffer.from(s).toString("base64");
}

export function sleep(ms: number): Promise<void> {
	return new Promise((resolve) => setTimeout(resolve, ms));
}
