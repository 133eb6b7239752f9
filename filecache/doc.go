// Package filecache keeps what a process made of a file (decoded,
// parsed), for a process that reads the same files again and again (the
// daemon): per reader and path, and trusted only while the file, opened
// and read by that reader on every use, has the identity, size, times
// and bytes it had when the value was made, and had settled before that
// read (Keep): what is saved is the making (parsing, decoding), never
// the read. A value must be a function of the file's bytes alone.
//
// Of sandboxd's packages it imports none.
package filecache
