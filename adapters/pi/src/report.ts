// What a run's report says to pi's user and to the model: the
// boundaries granted before a retry (and by whom), and the ones denied,
// with who decided, told apart from a reviewer that could not decide.

import type { Boundary, Report } from "./daemon.ts";

/** Who decided, in words, by the broker's source. */
export function decidedBy(source: string): string {
	switch (source) {
		case "policy":
			return "your sandboxd policy";
		case "hard-deny":
			return "sandboxd's fixed rules (never granted)";
		case "reviewer":
			return "the model reviewer";
		case "human":
			return "a person at the terminal";
		case "client":
			return "a person, answering in pi";
		case "grant":
			return "an earlier grant";
		case "circuit-breaker":
			return "sandboxd's circuit breaker (this session is locked after repeated denials)";
		case "no-reviewer":
			return "nobody: no reviewer is set up or reachable";
		case "error":
			return "nobody: the reviewer failed (a reviewer fault)";
		default:
			return source || "sandboxd";
	}
}

/** A boundary denied for want of a decision: the reviewer failed
 * ("error"), or none could be asked ("no-reviewer"). */
export function isFault(source: string): boolean {
	return source === "error" || source === "no-reviewer";
}

/** What a boundary touched: "write_file /x" or "connect host:443". */
export function target(b: Boundary): string {
	const what = b.path || b.destination || "";
	return what ? `${b.operation} ${what}` : b.operation;
}

function dedupe(bs: Boundary[]): Boundary[] {
	const seen = new Set<string>();
	const out: Boundary[] = [];
	for (const b of bs) {
		const k = `${b.surface}\u0000${target(b)}\u0000${b.decision}`;
		if (!seen.has(k)) {
			seen.add(k);
			out.push(b);
		}
	}
	return out;
}

/** The boundaries of attempt n that were allowed (and so are retried). */
export function granted(rep: Report, attempt: number): Boundary[] {
	return dedupe((rep.boundaries ?? []).filter((b) => b.attempt === attempt && b.decision === "allow"));
}

/** The boundaries the run was denied, over all attempts. */
export function denied(rep: Report): Boundary[] {
	return dedupe((rep.boundaries ?? []).filter((b) => b.decision === "deny"));
}

/** grantedLines tells pi's user what was granted, by whom and why. */
export function grantedLines(bs: Boundary[]): string[] {
	return bs.map((b) => {
		const why = b.rationale ? `: ${b.rationale}` : "";
		return `${target(b)} — granted by ${decidedBy(b.source)}${why}`;
	});
}

/** denialText is what the model reads of a run's denied boundaries:
 * what was denied, who decided, and that rephrasing is denied too; a
 * reviewer that failed is told apart from one that decided. */
export function denialText(bs: Boundary[]): string {
	if (bs.length === 0) return "";
	const decided = bs.filter((b) => !isFault(b.source));
	const faults = bs.filter((b) => isFault(b.source));
	const lines: string[] = [];
	if (decided.length > 0) {
		lines.push("[sandboxd] This command was denied access it needed:");
		for (const b of decided) {
			const why = b.rationale ? ` (${b.rationale})` : "";
			lines.push(`- ${target(b)}: denied by ${decidedBy(b.source)}${why}`);
		}
		lines.push(
			"The decision is final for this request: running the command again, or rephrasing it to reach the same thing another way, will be denied too. Tell the user what was denied and why if they need it.",
		);
	}
	if (faults.length > 0) {
		lines.push("[sandboxd] No decision could be made on these, so they were not allowed (not a denial by a reviewer):");
		for (const b of faults) {
			const why = b.rationale ? ` (${b.rationale})` : "";
			lines.push(`- ${target(b)}: ${decidedBy(b.source)}${why}`);
		}
		lines.push(
			"Rephrasing will not help: ask the user to set up or fix sandboxd's reviewer (sandboxd doctor), or to allow this in their sandboxd policy.",
		);
	}
	return lines.join("\n");
}
