// The package's settings, from the environment pi runs in (nothing is
// read from the project: a workspace must not loosen them).

import { DEFAULT_SOCKET } from "./daemon.ts";

export interface Config {
	/** The daemon's socket (SANDBOXD_SOCKET, as sandboxd's own CLI). */
	socket: string;
	/** The sandboxd binary for embedded runs when the daemon is down. */
	sandboxd: string;
	/** What the authorizer link answers when it cannot reach a decision. */
	onError: "defer" | "deny";
	/** How long the link waits for the daemon's review, in milliseconds. */
	reviewTimeoutMs: number;
	/** Retries after granted boundaries: one, as the tool's contract. */
	retries: number;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
	const timeout = Number.parseInt(env.SANDBOXD_PI_REVIEW_TIMEOUT_MS ?? "", 10);
	return {
		socket: env.SANDBOXD_SOCKET || DEFAULT_SOCKET,
		sandboxd: env.SANDBOXD_BIN || "sandboxd",
		onError: env.SANDBOXD_PI_ON_ERROR === "deny" ? "deny" : "defer",
		reviewTimeoutMs: Number.isFinite(timeout) && timeout > 0 ? timeout : 20_000,
		retries: 1,
	};
}
