// sandboxd for the pi coding agent: pi's own bash tool, whose commands
// run in sandboxd's sandbox (through the daemon, or `sandboxd run` when
// it is down), `!` and `!!` commands likewise, and the authorizer link
// "sandboxd" for pi-permission-system's chain. See README.md.

import { AsyncLocalStorage } from "node:async_hooks";
import { fileURLToPath } from "node:url";
import { createBashToolDefinition, type ExtensionAPI, type ExtensionContext } from "@earendil-works/pi-coding-agent";
import {
	type AskDetails,
	type AuthorizerLog,
	createAuthorize,
	type LinkDeps,
	type PermissionsService,
	registerLink,
	type Verdict,
} from "./authorizer.ts";
import { loadConfig } from "./config.ts";
import { Client, currentUmask, envList } from "./daemon.ts";
import { createOperations, type RunContext, type UI } from "./exec.ts";

/** Where pi-permission-system publishes its services (its public
 * contract: Symbol.for keys on globalThis, which survive jiti's module
 * isolation): keyed by session from 27, one slot before 29. */
const SESSION_SERVICES = Symbol.for("@gotgenes/pi-permission-system:session-services");
const LEGACY_SERVICE = Symbol.for("@gotgenes/pi-permission-system:service");

/** This file, as pi names an extension's source. */
function ownPath(): string {
	try {
		return fileURLToPath(import.meta.url);
	} catch {
		return "";
	}
}

export default function sandboxd(pi: ExtensionAPI): void {
	const cfg = loadConfig();
	const self = ownPath();
	const intents = new Map<string, string>(); // session → the person's latest request
	const cwds = new Map<string, string>(); // session → its directory
	const links = new Map<string, () => void>(); // session → the link's disposer
	const linking = new Set<string>();
	const warned = new Set<string>();
	let ui: UI | undefined;
	let client: Client | undefined;

	const warnOnce = (key: string, message: string) => {
		if (warned.has(key)) return;
		warned.add(key);
		if (ui) ui.notify(message, "warning");
		else process.stderr.write(`${message}\n`);
	};

	const daemon = async (): Promise<{ client: Client } | { down: string }> => {
		if (client?.connected) return { client };
		try {
			const c = new Client({ socket: cfg.socket, uid: process.getuid?.() ?? -1 });
			await c.connect();
			client = c;
			return { client: c };
		} catch (err) {
			return { down: (err as Error).message };
		}
	};
	const deps = { daemon, sandboxd: cfg.sandboxd, retries: cfg.retries, warnOnce };

	const sessionOf = (ctx: ExtensionContext): string => {
		try {
			return ctx.sessionManager.getSessionId() ?? "";
		} catch {
			return "";
		}
	};
	const runFor = (ctx: ExtensionContext | undefined, intent?: string): RunContext => {
		const session = ctx ? sessionOf(ctx) : "";
		return {
			sessionId: session,
			intent: intent ?? intents.get(session) ?? "",
			ui: ctx?.hasUI ? (ctx.ui as UI) : undefined,
			denials: { count: 0, faults: 0 },
			retried: { grants: [], granted: [] },
		};
	};

	// The model's bash tool: pi's own definition (its rendering and
	// truncation), its commands run by sandboxd. A run's denials make the
	// result an error for the model, whatever the command's status.
	const current = new AsyncLocalStorage<RunContext>();
	const operations = createOperations(deps, () => current.getStore() ?? runFor(undefined));
	const bash = createBashToolDefinition(process.cwd(), { operations });
	pi.registerTool({
		...bash,
		async execute(toolCallId, params, signal, onUpdate, ctx) {
			const run = runFor(ctx);
			const result = await current.run(run, () => bash.execute(toolCallId, params, signal, onUpdate, ctx));
			// The grants presented are spent (consumed, or refused); they
			// stay in the details, for the person and the audit log, never
			// in what the model reads.
			const details = run.retried.grants.length > 0 ? { ...(result.details ?? {}), sandboxd: run.retried } : result.details;
			return { ...result, details, ...(run.denials.count > 0 ? { isError: true } : {}) };
		},
	});

	// `!` and `!!`: the person's own commands, sandboxed the same way;
	// the command they typed is their request.
	pi.on("user_bash", (event, ctx) => ({
		operations: createOperations(deps, () => runFor(ctx, `The person ran this shell command themselves: ${event.command}`)),
	}));

	// The intent is the latest message the person typed: never a message
	// an extension sent, a tool's output or the assistant's text.
	pi.on("input", (event, ctx) => {
		if (event.source !== "extension" && typeof event.text === "string") intents.set(sessionOf(ctx), event.text);
		return { action: "continue" };
	});

	// servesSession: this package's bash tool is the active bash of the
	// session, so an allowed command runs sandboxed.
	const servesSession = (session: string): boolean => {
		if (!cwds.has(session) || !pi.getActiveTools().includes("bash")) return false;
		const info = pi.getAllTools().find((t) => t.name === "bash");
		// Unknown when this file cannot name itself: then no session is
		// taken for served (the link defers), rather than any bash.
		return info !== undefined && self !== "" && info.sourceInfo?.path === self;
	};

	pi.on("session_start", (_event, ctx) => {
		if (ctx.hasUI) ui = ctx.ui as UI;
		cwds.set(sessionOf(ctx), ctx.cwd);
	});
	pi.on("session_shutdown", (_event, ctx) => {
		const session = sessionOf(ctx);
		links.get(session)?.();
		links.delete(session);
		cwds.delete(session);
		intents.delete(session);
		client = undefined;
	});

	const context = (cwd: string) => ({ env: envList(process.env), cwd, umask: currentUmask() });
	const linkDeps: LinkDeps = {
		async review(req, cwd, signal) {
			const got = await daemon();
			if ("down" in got) throw new Error(got.down);
			return got.client.review({ ...req, ...context(cwd) }, signal, cfg.reviewTimeoutMs);
		},
		async check(req, cwd, signal) {
			const got = await daemon();
			if ("down" in got) throw new Error(got.down);
			return got.client.check({ ...req, ...context(cwd) }, signal, cfg.reviewTimeoutMs);
		},
		servesSession,
		intent: (session: string) => intents.get(session) ?? "",
		cwd: (session: string) => cwds.get(session) ?? "",
		onError: cfg.onError,
		timeoutMs: cfg.reviewTimeoutMs,
	};

	// The authorizer link: registered on every permissions:ready (it
	// fires more than once per session), once per session. Before 27 the
	// event carries no session, and may come before this package's
	// session_start: the link then waits for it.
	let unkeyedReady = false;
	const link = (session: string, keyed: boolean) => {
		if (session === "" || links.has(session) || linking.has(session)) return;
		linking.add(session);
		void findService(keyed ? session : undefined)
			.then((service) => {
				const authorize = createAuthorize(session, linkDeps) as (d: AskDetails, q: unknown, l: AuthorizerLog) => Promise<Verdict>;
				const got = registerLink(service, authorize);
				if (got.state === "registered") links.set(session, got.dispose);
				else if (got.state === "already") links.set(session, () => {});
				else if (got.state === "no-seam") {
					warnOnce(
						"no-seam",
						"sandboxd: the installed pi-permission-system has no authorizer seam (registerAuthorizer came in 20.9): the sandboxd link is unavailable, and the sandboxed bash tool works without it",
					);
				}
			})
			.catch((err) => warnOnce("link-failed", `sandboxd: the authorizer link could not be registered: ${(err as Error).message}`))
			.finally(() => linking.delete(session));
	};
	pi.events.on("permissions:ready", (data: unknown) => {
		const sid = (data as { sessionId?: unknown } | null)?.sessionId;
		if (typeof sid === "string") {
			link(sid, true);
			return;
		}
		unkeyedReady = true;
		const session = [...cwds.keys()].at(-1);
		if (session !== undefined) link(session, false);
	});
	pi.on("session_start", (_event, ctx) => {
		if (unkeyedReady) link(sessionOf(ctx), false);
	});
}

/** findService is pi-permission-system's service for session (its
 * getPermissionsService), or the one service of a version before 27. */
async function findService(session: string | undefined): Promise<PermissionsService | undefined> {
	try {
		const mod = (await import("@gotgenes/pi-permission-system")) as { getPermissionsService?: (s?: string) => unknown };
		if (typeof mod.getPermissionsService === "function") {
			const s = session === undefined ? mod.getPermissionsService() : mod.getPermissionsService(session);
			if (s) return s as PermissionsService;
		}
	} catch {
		// Not resolvable from this package: read the published slots.
	}
	const g = globalThis as Record<symbol, unknown>;
	const keyed = g[SESSION_SERVICES];
	if (session !== undefined && keyed instanceof Map) return keyed.get(session) as PermissionsService | undefined;
	return g[LEGACY_SERVICE] as PermissionsService | undefined;
}
