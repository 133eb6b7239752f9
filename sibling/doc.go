// Package sibling finds a program of sandboxd's installed beside the
// running one's executable (the lean helper beside the core, the core
// beside the lean front) and opens it only when nobody but root, or the
// owner of the running executable, could have put it there or changed
// it on the way: the file, its directory and every directory above.
// Whoever else could would run code as every user who runs sandboxd.
// A program so opened is executed through its descriptor, which names
// the process after the descriptor: Named gives it its name back.
//
// Of sandboxd's packages it imports none.
package sibling
