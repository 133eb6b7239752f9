// Package gitconfig reads git configuration files the way git itself reads
// them, and says which entries can make git run a program or load more
// configuration.
//
// It exists so that sandboxd can inspect a repository's config (for example
// .git/config after a sandboxed command changed it) without running git on
// it. Input is untrusted: Parse fails closed, rejecting everything git rejects
// and a few things git accepts but Entry cannot represent faithfully.
//
// Of sandboxd's packages it imports none, and of others only the standard
// library, and must stay that way; it does no I/O and never runs git.
package gitconfig
