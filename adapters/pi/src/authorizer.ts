// The authorizer link "sandboxd" for pi-permission-system's authorizer
// chain (the seam appeared in 20.9; the session-keyed service in 27; the
// zero-argument accessor was removed in 29). The permission system asks
// the links in its configured `authorizerChain` order about a request
// its rules left at "ask", before it asks a person.
//
// What this link answers:
//   - a bash command: allow only when it runs in bash (not in a shell
//     alias the permission system gates as bash) and this package's
//     sandboxed bash tool serves the session (else the command would run
//     bare: defer), after
//     the daemon's broker reviewed the whole command with the person's
//     request; the broker's deny is a deny with its reason;
//   - a path (pi's own file tools, which run outside every sandbox):
//     deny what sandboxd's rules refuse (secrets, its own state,
//     start-up locations, names a file tool may not write), else defer;
//   - anything else: defer.
// It never throws or rejects: any failure is a defer (or a deny, when
// configured), never an allow.

import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { checkDecision, type Decision, type ReviewRequest } from "./daemon.ts";
import { decidedBy, isFault } from "./report.ts";

/** The verdict the chain takes from a link. */
export type Verdict = { kind: "allow" } | { kind: "deny"; reason: string } | { kind: "defer" };

/** The log the chain passes a link (the permission system's review log). */
export interface AuthorizerLog {
	review?(event: string, details?: Record<string, unknown>): void;
	debug?(event: string, details?: Record<string, unknown>): void;
}

/** What the link reads of the chain's request; every field is checked,
 * as the details come from another package. */
export interface AskDetails {
	requestId?: unknown;
	toolCallId?: unknown;
	toolName?: unknown;
	surface?: unknown;
	command?: unknown;
	path?: unknown;
	agentName?: unknown;
	forwarding?: unknown;
	accessIntent?: unknown;
	payload?: unknown;
}

export interface LinkDeps {
	/** Reviews one boundary through the daemon (a command, surface "command"). */
	review(req: Omit<ReviewRequest, "env" | "cwd" | "umask">, cwd: string, signal: AbortSignal): Promise<Decision>;
	/** Whether sandboxd's rules alone refuse a path operation. */
	check(req: Omit<ReviewRequest, "env" | "cwd" | "umask">, cwd: string, signal: AbortSignal): Promise<{ denied: boolean; why: string }>;
	/** Whether this package's sandboxed bash tool runs the commands of sessionId. */
	servesSession(sessionId: string): boolean;
	/** The person's latest request in sessionId, the reviewer's evidence. */
	intent(sessionId: string): string;
	/** The session's working directory. */
	cwd(sessionId: string): string;
	onError: "defer" | "deny";
	timeoutMs: number;
}

const PATH_KINDS = new Set([
	"path",
	"path_read",
	"path_write",
	"external_directory",
	"external_directory_read",
	"external_directory_write",
	"bash_external_directory",
]);

const READ_TOOLS = new Set(["read", "grep", "find", "ls"]);

function str(v: unknown): string {
	return typeof v === "string" ? v : "";
}

function obj(v: unknown): Record<string, unknown> {
	return v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
}

/** kindOf is what the ask is about: the payload's kind, else the surface. */
export function kindOf(d: AskDetails): string {
	const payload = obj(d.payload);
	const request = obj(payload.request);
	return str(payload.kind) || str(obj(d.accessIntent).surface) || str(d.surface) || str(request.surface);
}

/** wholeCommand is the command the agent sent, not the unit the
 * permission system split out of it: the evidence "full command" when
 * the chain gives it, else the details' command. */
export function wholeCommand(d: AskDetails): string {
	const payload = obj(d.payload);
	if (Array.isArray(payload.evidence)) {
		for (const e of payload.evidence) {
			const ev = obj(e);
			if (str(ev.label).toLowerCase() === "full command" && str(ev.text) !== "") return str(ev.text);
		}
	}
	return str(d.command) || str(obj(payload.request).value);
}

/** shellTool is the tool that runs a bash ask's command: "bash" only
 * when every name the ask gives is bash. pi-permission-system gates a
 * shell alias (its shellTools: exec_command, say, another extension's
 * tool that runs the command itself) as bash, with the tool the agent
 * called in request.invokedToolName; an allow for it would run the
 * command bare. No name at all is not taken for bash either. */
export function shellTool(d: AskDetails): string {
	const request = obj(obj(d.payload).request);
	const names = [request.invokedToolName, request.toolName, d.toolName].filter((n) => n !== undefined && n !== null);
	if (names.length === 0) return "";
	const other = names.find((n) => n !== "bash");
	return other === undefined ? "bash" : typeof other === "string" ? other : "";
}

/** requesterSession is the session whose tool asks: a forwarded ask's
 * requester, else the link's own. */
function requesterSession(d: AskDetails, own: string): string {
	const fwd = obj(d.forwarding);
	const requester = obj(obj(obj(d.payload).request).requester);
	return str(fwd.requesterSessionId) || str(requester.sessionId) || own;
}

/** pathsOf are the absolute forms of the ask's path, from cwd. */
export function pathsOf(d: AskDetails, cwd: string): string[] {
	const values: string[] = [];
	const intent = obj(d.accessIntent);
	if (Array.isArray(intent.matchValues)) for (const v of intent.matchValues) values.push(str(v));
	values.push(str(d.path), str(intent.boundaryValue), str(obj(obj(d.payload).request).value));
	const out = new Set<string>();
	for (const v of values) {
		if (v === "" || v.includes("\u0000")) continue;
		for (let p of [v, asPiReads(v)]) {
			if (!path.isAbsolute(p)) {
				if (!cwd) continue;
				p = path.resolve(cwd, p);
			}
			out.add(path.normalize(p).replace(/(.)\/+$/, "$1"));
		}
	}
	return [...out];
}

/** asPiReads is v as pi's file tools read it before they touch it (its
 * normalizePath, in its order): unicode spaces folded to a space, one
 * leading "@" (a file mention) dropped, "~" and "~/" expanded, a
 * file:// URL made a path. The path as given is checked too: an ask
 * may carry either spelling, and "@~/.ssh/id_rsa" is ~/.ssh/id_rsa. */
export function asPiReads(v: string): string {
	let n = v.replace(/[\u00A0\u2000-\u200A\u202F\u205F\u3000]/g, " ");
	if (n.startsWith("@")) n = n.slice(1);
	const home = os.homedir();
	if (n === "~") return home;
	if (n.startsWith("~/")) return path.join(home, n.slice(2));
	if (/^file:\/\//.test(n)) {
		try {
			return fileURLToPath(n);
		} catch {
			return n;
		}
	}
	return n;
}

/** operationsOf are the operations an ask's path is checked for: a read
 * for the reading tools and the read members, a write (which sandboxd's
 * rules refuse in more places) and a read otherwise. The direction is in
 * the gate's surface (accessIntent's, the request's), not in the
 * payload's kind, which names only the family ("path"): reading a
 * start-up file is not refused as writing it would be. */
function operationsOf(d: AskDetails, kind: string): string[] {
	const request = obj(obj(d.payload).request);
	const surfaces = [kind, str(obj(d.accessIntent).surface), str(request.surface), str(d.surface)];
	if (surfaces.some((s) => s.endsWith("_write"))) return ["read_file", "write_file"];
	const tool = str(d.toolName) || str(request.toolName);
	if (surfaces.some((s) => s.endsWith("_read")) || READ_TOOLS.has(tool)) return ["read_file"];
	return ["read_file", "write_file"];
}

/** withTimeout settles with fn's answer, or rejects after ms. */
async function withTimeout<T>(ms: number, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
	const ac = new AbortController();
	let timer: NodeJS.Timeout | undefined;
	const late = new Promise<never>((_, reject) => {
		timer = setTimeout(() => {
			ac.abort();
			reject(new Error(`the daemon did not answer within ${ms} ms`));
		}, ms);
	});
	try {
		return await Promise.race([fn(ac.signal), late]);
	} finally {
		clearTimeout(timer);
	}
}

/** createAuthorize is the link's authorize function for the session
 * the link is registered in. */
export function createAuthorize(sessionId: string, deps: LinkDeps) {
	const failed = (log: AuthorizerLog | undefined, requestId: string, err: unknown): Verdict => {
		const why = describe(err);
		safeLog(log, "sandboxd_link_failed", { requestId, error: why, answer: deps.onError });
		if (deps.onError === "deny") return { kind: "deny", reason: `sandboxd could not judge this request (${why}), and is set to deny then` };
		return { kind: "defer" };
	};
	return async function authorize(details: AskDetails, _query?: unknown, log?: AuthorizerLog): Promise<Verdict> {
		let requestId = "";
		try {
			const d = obj(details) as AskDetails;
			requestId = str(d.requestId);
			const kind = kindOf(d);
			const session = requesterSession(d, sessionId);
			const cwd = deps.cwd(session) || deps.cwd(sessionId);
			if (kind === "bash") return await judgeCommand(d, session, cwd, requestId, log);
			if (PATH_KINDS.has(kind)) return await judgePath(d, kind, session, cwd, requestId, log);
			return { kind: "defer" };
		} catch (err) {
			return failed(log, requestId, err);
		}
	};

	async function judgeCommand(d: AskDetails, session: string, cwd: string, requestId: string, log?: AuthorizerLog): Promise<Verdict> {
		const tool = shellTool(d);
		if (tool !== "bash") {
			safeLog(log, "sandboxd_link_defer", { requestId, why: `the command runs in the tool ${JSON.stringify(tool)}, not sandboxd's bash tool` });
			return { kind: "defer" };
		}
		if (!deps.servesSession(session)) {
			safeLog(log, "sandboxd_link_defer", { requestId, why: "sandboxd's bash tool does not run this session's commands" });
			return { kind: "defer" };
		}
		const command = wholeCommand(d);
		if (command === "" || !cwd) return { kind: "defer" };
		// Checked here too, not only by the client: an answer that is not a
		// decision is a failure, never read as an allow or a deny.
		const decision = checkDecision(
			await withTimeout(deps.timeoutMs, (signal) =>
				deps.review({ command, surface: "command", operation: "run", session, intent: deps.intent(session), agent: "pi" }, cwd, signal),
			),
		);
		if (decision.outcome === "allow") {
			safeLog(log, "sandboxd_link_allow", { requestId, source: decision.source });
			return { kind: "allow" };
		}
		if (isFault(decision.source)) {
			return failed(log, requestId, new Error(`${decidedBy(decision.source)}${decision.rationale ? `: ${decision.rationale}` : ""}`));
		}
		const reason = `sandboxd denied this command: ${decidedBy(decision.source)}${decision.rationale ? ` (${decision.rationale})` : ""}. Rephrasing it to do the same will be denied too.`;
		safeLog(log, "sandboxd_link_deny", { requestId, source: decision.source });
		return { kind: "deny", reason };
	}

	async function judgePath(d: AskDetails, kind: string, session: string, cwd: string, requestId: string, log?: AuthorizerLog): Promise<Verdict> {
		const paths = pathsOf(d, cwd);
		if (paths.length === 0 || !cwd) return { kind: "defer" };
		for (const p of paths) {
			for (const operation of operationsOf(d, kind)) {
				const out = await withTimeout(deps.timeoutMs, (signal) =>
					deps.check({ surface: "filesystem", operation, path: p, session, agent: "pi" }, cwd, signal),
				);
				if (out.denied) {
					safeLog(log, "sandboxd_link_deny", { requestId, path: p, operation });
					return { kind: "deny", reason: `sandboxd never allows this: ${p}: ${out.why}` };
				}
			}
		}
		return { kind: "defer" };
	}
}

/** describe is an error's message; anything thrown (a value without a
 * message, one that cannot become a string) is described, not rethrown,
 * as authorize must not reject. */
function describe(err: unknown): string {
	try {
		return err instanceof Error && typeof err.message === "string" ? err.message : String(err);
	} catch {
		return "an error that cannot be shown";
	}
}

function safeLog(log: AuthorizerLog | undefined, event: string, details: Record<string, unknown>): void {
	try {
		log?.review?.(event, details);
	} catch {
		// A log that throws is the chain's problem, not a reason to fail.
	}
}

/** A service as this link uses it: the seam's one method. */
export interface PermissionsService {
	registerAuthorizer?: (name: string, authorize: (details: AskDetails, query: unknown, log: AuthorizerLog) => Promise<Verdict>) => () => void;
}

export const LINK_NAME = "sandboxd";

/** registerLink registers authorize in service under LINK_NAME and
 * answers the disposer: "registered", "already" (the chain has a link of
 * that name: done), or "no-seam" (a version without the seam). */
export function registerLink(
	service: PermissionsService | undefined,
	authorize: (details: AskDetails, query: unknown, log: AuthorizerLog) => Promise<Verdict>,
): { state: "registered"; dispose: () => void } | { state: "already" | "no-seam" | "no-service" } {
	if (!service) return { state: "no-service" };
	if (typeof service.registerAuthorizer !== "function") return { state: "no-seam" };
	try {
		const dispose = service.registerAuthorizer(LINK_NAME, authorize);
		return { state: "registered", dispose: typeof dispose === "function" ? dispose : () => {} };
	} catch (err) {
		const e = err as { code?: unknown; message?: unknown };
		if (e?.code === "AUTHORIZER_ALREADY_REGISTERED" || /already registered/i.test(String(e?.message ?? ""))) {
			return { state: "already" };
		}
		throw err;
	}
}
