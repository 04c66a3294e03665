package jetstream

import (
	"strings"

	"github.com/contrail/contrail/dataplane/jetstream/api"
)

// On a cluster every node receives every API request of an account (the
// API subjects are subscribed on each node, and routes carry each request
// to all of them); exactly one answers, as with nats-server:
//
//   - stream create, update and delete: the meta leader checks them
//     against the catalog and puts them in the meta log; the node that
//     holds the stream runs and answers them once applied;
//   - account info, stream names and lists: the meta leader;
//   - everything naming a stream: the node holding it (its partition's
//     leader, or the R1 stream's owner); a stream the catalog does not
//     know is answered (not found) by the meta leader.
//
// The others stay silent. With no leader nobody answers, and the client's
// timeout says so, as nats-server's clients see it.

// metaOps are the operations decided by the meta leader.
var metaOps = map[string]bool{"STREAM.CREATE": true, "STREAM.UPDATE": true, "STREAM.DELETE": true}

// catalogReads are answered by the meta leader from the catalog.
var catalogReads = map[string]bool{"INFO": true, "STREAM.NAMES": true, "STREAM.LIST": true}

// clusterAdmit decides whether this node answers the request on subject;
// meta operations it accepts are marked for the meta path.
func (a *jsAccount) clusterAdmit(subject string) (answer, meta bool) {
	c := a.e.cl
	if c.r == nil {
		return false, false
	}
	if !a.enabled.Load() {
		// Nothing of the account runs anywhere: one node says so.
		return c.metaLeader(), false
	}
	op := a.apiOpName(subject)
	route, rest := op, ""
	if _, name, ok := routeOf(op); ok {
		route = strings.TrimSuffix(op[:len(op)-len(name)], ".")
		rest = name
	} else if rest, ok = strings.CutPrefix(op, "DIRECT.GET."); ok {
		route = "DIRECT.GET"
	}
	switch {
	case metaOps[route]:
		return c.metaLeader(), true
	case catalogReads[route]:
		return c.metaLeader(), false
	}
	name, _, _ := strings.Cut(rest, ".")
	if name != "" && a.lookup(name) != nil {
		return true, false
	}
	if name != "" && c.catalog.lookup(a.acc.Name(), name) != nil {
		return false, false
	}
	return c.metaLeader(), false
}

// catalogNames lists an account's streams from the catalog, optionally
// only those whose subjects overlap filter.
func (c *clusterState) catalogNames(account, filter string) []*assignment {
	all := c.catalog.streams(account)
	if filter == "" {
		return all
	}
	var out []*assignment
	for _, asg := range all {
		idx := newStreamIndex(1)
		idx.put(&stream{}, asg.Config)
		if idx.overlaps([]string{filter}, nil) {
			out = append(out, asg)
		}
	}
	return out
}

// catalogInfo is what the meta leader lists for a stream: the stream's own
// info where it lives here, else its config and the state its records in
// this node's store (a replica of every partition) hold.
func (a *jsAccount) catalogInfo(asg *assignment) *api.StreamInfo {
	if s := a.lookup(asg.Name); s != nil {
		if info, err := s.info(nil); err == nil {
			info.Config = *s.config()
			return info
		}
	}
	info := &api.StreamInfo{Config: *asg.Config, Created: asg.Created, Domain: a.e.opts.Domain,
		TimeStamp: a.e.opts.Now().UTC(), Cluster: a.e.cl.clusterInfo(asg.ID)}
	if st, err := a.e.opts.Store.LoadStream(asg.ID); err == nil {
		info.State = stateOf(st.State)
	}
	return info
}

// stepdown hands the leadership of the stream's partition to another
// member (or, with a preferred placement, to that one).
func (a *jsAccount) stepdown(s *stream, preferred string) *api.Error {
	c := a.e.cl
	g := groupOf(s.id)
	if c == nil || g == 0 {
		return api.NewClusterRequiredError()
	}
	if err := c.r.Group(g).TransferLeadership(preferred); err != nil {
		return api.NewStreamGeneralError(err)
	}
	return nil
}
