//go:build !race

package store

// raceSlowdown scales timing bounds; 1 without the race detector.
const raceSlowdown = 1
