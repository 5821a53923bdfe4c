// Package testwait waits, in tests, for what another goroutine or process
// does: Eventually polls a condition until it holds, Receive waits for a
// channel; both fail the test when a deadline passes first.
//
// Guarantees:
//   - The deadline only keeps a broken build from hanging: nothing is
//     timed, so callers pass generous figures, and a condition that holds
//     returns at once (it is checked before the first pause).
//   - The condition runs on the caller's goroutine, one call at a time, so
//     it may call t.Fatal and touch the test's variables without locks.
//   - A failure message names what was awaited. Its arguments are
//     formatted only on failure: a Lazy argument (the logs of a child
//     process, say) costs nothing while the test passes; a condition that
//     wants its last error reported keeps it in a variable the message
//     reads through Lazy.
//
// To show that something did NOT happen, wait for an event after which it
// would have happened, then look; a sleep followed by a look proves nothing
// on a loaded machine. Where the thing waited on is an in-process timer,
// testing/synctest's fake clock is the better tool.
package testwait
