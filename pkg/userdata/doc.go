// Package userdata renders a Machine's user data: JSON (an Ignition config)
// passes through byte for byte, anything else is a Jsonnet template that
// sees the Machine and the user-data secret's keys.
//
// The people who may write a Secret in the Machines' namespace are not
// necessarily the people who run the manager, so a template is hostile
// input. It is evaluated in a sandbox:
//
//   - in a child process (the running binary, re-executed), so that a
//     template that never finishes, allocates without bound or overflows the
//     Go stack is killed with its process and never takes the manager with
//     it (a goroutine abandoned after a timeout would keep burning CPU and
//     memory, and a stack overflow is fatal to the whole process);
//   - with a wall-clock timeout, an RLIMIT_CPU backstop, a memory watchdog
//     and an RLIMIT_AS backstop, GOMAXPROCS=1 and an empty environment;
//   - with every import refused (import, importstr, importbin), checked on
//     the parsed template before evaluation and again by an importer that
//     refuses everything, so no file of the manager's filesystem is read;
//   - with std.trace discarded, and the child's stderr never forwarded, so
//     a template cannot write into the manager's logs;
//   - a bounded number at a time; the context's end kills the child at once.
//
// Errors never quote the template, the secret or the output: they name the
// line and column, the limit hit or the refused import. They are *Error when
// the template is at fault (the Machine should fail), plain errors otherwise
// (cancelled, or the sandbox could not start: retry).
//
// A binary that renders user data must call Main first thing in main, and a
// test package that renders templates must call it from TestMain: the child
// is the same executable, and Main is where it becomes the sandbox.
package userdata
