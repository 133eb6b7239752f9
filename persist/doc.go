// Package persist owns what a sandboxed command may leave behind in its
// workspace: nothing that a program on the host runs or loads later
// without being asked. It is the one home of these rules, shared by the
// layer's commit (package layer) and by a run written straight to the
// workspace (--no-transaction: the sweep, which package sandbox runs):
//
//   - what git takes for a repository (gitdir.go, from git's setup.c,
//     checked against git itself by a fuzz test);
//   - the protected names and where they apply (names.go, data with the
//     tool, the moment and the source for each), and how a settings file
//     that mixes plain and program-naming settings is read as its tool
//     reads it (settings.go; npmrc.go, hgrc.go, yamlkeys.go, tomlkeys.go);
//   - the decision for one change (check.go), the files a repository's
//     config makes hooks or config wherever they are (roles.go), the
//     repository state git executes later (gitstate.go), the history a
//     command writes into a repository (history.go), git's own linked
//     worktrees and submodules (linked.go), and a repository's metadata
//     committed whole or not at all (rollback.go);
//   - the permission rule (perms.go);
//   - the workspace scan that finds repositories and names at any depth
//     (scan.go);
//   - a repository the command made, kept only when it carries nothing
//     that runs code (newrepo.go);
//   - the sweep of a run without a layer: its plan of what to bind
//     (sweep_plan.go), what it finds new after the run (sweep_find.go),
//     its verdicts (sweep_judge.go) and its passes (sweep.go), the
//     quarantine it moves refusals to (quarantine.go), and the copy of
//     each repository's history it puts back when the rules refuse what
//     the run added (snapshot.go). It acts on the workspace itself, as
//     whoever calls it: package sandbox calls it as the caller (fsid);
//   - outside the workspace, the host's start-up locations, which the
//     broker refuses before any reviewer (startup.go).
//
// Rules read the tree through FS: the host's, or the workspace as a
// commit would leave it; only the sweep changes the tree. Of sandboxd's
// packages it imports only atomicfile, gitconfig, pathtree and publicerr; of
// others, the standard library, golang.org/x/sys, and go-toml and
// go.yaml.in/yaml (to read tools' settings). It never runs git, and must
// never import sandbox/..., review/..., layer or broker.
package persist
