//go:build race

package main

// raceEnabled: the test binary runs under the race detector, which slows
// it and grows its memory several times.
const raceEnabled = true
