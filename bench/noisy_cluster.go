package main

import (
	"context"
	"fmt"
	"os"
	"time"
)

// noisyClusterBenchmark (-noisy -cluster) runs the noisy-neighbour ingest
// part on three-node clusters with every stream R3: Contrail, nats-server
// with its default fsync, and nats-server fsyncing before each ack. One
// cluster runs at a time, so no side shares the cores with another's
// idle nodes.
func noisyClusterBenchmark(ctx context.Context, cfg config) error {
	env, err := startNoisyEnv(ctx, cfg, "contrail-bench-noisy-cluster-")
	if err != nil {
		return err
	}
	defer env.close()
	root, contrailBin, serverBin, world := env.root, env.contrailBin, env.serverBin, env.world
	trust := world.contrailTrust()
	contrail := func(i int, ports [][3]int, dir, dataDir string) ([]string, error) {
		args, err := contrailClusterArgs(i, ports, dir, dataDir)
		return append(args, trust...), err
	}
	sides := []clusterSpec{
		{sideContrail, "Contrail, 3 nodes, ack after a quorum fsynced", contrailBin, contrail},
		{sideNatsServer, "nats-server " + natsServer.version + ", 3 nodes, default fsync", serverBin, natsServerClusterArgs("", world.natsServerTrust())},
		{sideNatsServerFsy, "nats-server " + natsServer.version + ", 3 nodes, sync_interval: always", serverBin, natsServerClusterArgs("always", world.natsServerTrust())},
	}
	if cfg.selftest {
		sides[0].desc, sides[0].bin, sides[0].kind = "SELFTEST: a nats-server cluster (default fsync)", serverBin, sides[1].kind
	}
	fmt.Printf("ingest, R3: tenant A floods %d streams capped at %d messages, one connection each; tenant B publishes async (%d in flight) to its own stream for %s alone and %s during the flood\n",
		ingestFloodStreams, ingestFloodMaxMsgs, ingestWindow, ingestAlone, ingestFlooded)
	results, err := runSides(ctx, sides, func(s clusterSpec) *noisyIngest {
		fmt.Printf("\n%s: %s\n", s.name, s.desc)
		return runIngestCluster(ctx, s, root, world)
	})
	if err != nil {
		return err
	}
	printIngestTable(os.Stdout, results, clusterNodes)
	return sidesError(results)
}

// runIngestCluster starts one side's cluster, lets it settle, runs the
// ingest part on it with R3 streams, and stops it.
func runIngestCluster(ctx context.Context, s clusterSpec, root string, world *tenantWorld) *noisyIngest {
	r := &noisyIngest{sideOutcome: sideOutcome{side: s.name}}
	cs, err := startClusterSide(ctx, s.name, s.desc, s.bin, s.kind, root)
	if err != nil {
		r.failed = err
		return r
	}
	defer cs.stop()
	select {
	case <-time.After(clusterSettle):
	case <-ctx.Done():
		r.failed = ctx.Err()
		return r
	}
	err = r.measure(ctx, cs.all, world, clusterNodes, func() error {
		if n := cs.deadNode(); n != nil {
			return fmt.Errorf("%s exited: %v", n.name, n.waitErr)
		}
		return nil
	})
	if err != nil {
		r.failed = fmt.Errorf("%w\n%s", err, cs.logTails(15))
	}
	return r
}
