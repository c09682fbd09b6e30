//go:build !race

package fanout_test

// raceEnabled reports that the tests run under the race detector.
const raceEnabled = false
