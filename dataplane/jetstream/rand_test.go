package jetstream

import "math/rand/v2"

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed)) }
