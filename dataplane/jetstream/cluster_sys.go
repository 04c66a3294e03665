package jetstream

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/contrail/contrail/dataplane/jetstream/api"
)

// The cluster's administration requests, served in the system account as
// nats-server serves them (natscli's `nats server cluster step-down` and
// `nats server raft peer-remove` send them). Every node subscribes; only
// the meta leader answers, so exactly one reply comes, and with no meta
// leader none.
const (
	subjMetaStepdown = "$JS.API.META.LEADER.STEPDOWN"
	subjServerRemove = "$JS.API.SERVER.REMOVE"
	// subjPartitionRemove is the meta leader's request to every node to
	// remove a server from the partitions that node leads; each answers
	// with the partitions it no longer has the server in.
	subjPartitionRemove = "$JSC.SERVER.REMOVE"
)

// removeTimeout bounds the meta leader's wait for the partitions'
// leaders to remove a server.
const removeTimeout = 5 * time.Second

func init() {
	apiRoutes["STREAM.PEER.REMOVE"] = apiRoute{(*jsAccount).streamPeerRemove, failAs(api.TypeStreamRemovePeerResponse)}
}

// ServeSystem subscribes a clustered engine's administration requests in
// sys, the system account. The returned function unsubscribes. On an
// engine that is not clustered it does nothing.
func (e *Engine) ServeSystem(sys Account) (stop func(), err error) {
	c := e.cl
	if c == nil {
		return func() {}, nil
	}
	handlers := map[string]func(reply string, body []byte){
		subjMetaStepdown:    func(reply string, body []byte) { c.metaStepdown(sys, reply, body) },
		subjServerRemove:    func(reply string, body []byte) { c.serverRemove(sys, reply, body) },
		subjPartitionRemove: func(reply string, body []byte) { c.partitionRemove(sys, reply, body) },
	}
	var unsubs []func()
	stop = func() {
		for _, u := range unsubs {
			u()
		}
	}
	for subj, h := range handlers {
		u, err := sys.SubscribeInternal(subj, func(_, replyTo, _, msg []byte) {
			// Handlers must not block; these wait on raft. They are rare.
			reply, body := string(replyTo), bytes.Clone(msg)
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				h(reply, body)
			}()
		})
		if err != nil {
			stop()
			return nil, fmt.Errorf("jetstream: system account %s: %w", subj, err)
		}
		unsubs = append(unsubs, u)
	}
	return stop, nil
}

// sysReply sends resp to reply in the system account.
func sysReply(sys Account, reply string, resp any) {
	if reply == "" {
		return
	}
	b, err := json.Marshal(resp)
	if err != nil {
		return
	}
	sys.Publish(reply, "", nil, b)
}

// metaStepdown hands the meta leadership to another member (the
// preferred one, if the body names it).
func (c *clusterState) metaStepdown(sys Account, reply string, body []byte) {
	if c.r == nil || !c.metaLeader() {
		return
	}
	const typ = api.TypeMetaLeaderStepdownResponse
	var req api.LeaderStepdownRequest
	if aerr := decode(body, &req); aerr != nil {
		sysReply(sys, reply, &api.Response{Type: typ, Error: aerr})
		return
	}
	preferred := ""
	if req.Placement != nil {
		preferred = req.Placement.Preferred
	}
	preferred, aerr := c.preferredLeader(0, preferred)
	if aerr != nil {
		sysReply(sys, reply, &api.Response{Type: typ, Error: aerr})
		return
	}
	if err := c.r.Group(0).TransferLeadership(preferred); err != nil {
		sysReply(sys, reply, &api.Response{Type: typ, Error: api.NewRaftGeneralError(err)})
		return
	}
	sysReply(sys, reply, &api.SuccessResponse{Response: api.Response{Type: typ}, Success: true})
}

// preferredLeader checks a stepdown's preferred server against group g,
// which this node leads, as nats-server does: it must be another member.
// It returns the member's node name ("" for no preference), a name
// given as its hash resolved. A refused preference moves nothing: a
// transfer to this node would pause the group and resume it for nothing.
func (c *clusterState) preferredLeader(g uint16, preferred string) (string, *api.Error) {
	if preferred == "" {
		return "", nil
	}
	name := c.memberName(g, preferred)
	switch {
	case name == c.r.NodeID():
		return "", api.NewClusterNoPeersError(fmt.Errorf("preferred server %q is already leader", preferred))
	case name == "":
		return "", api.NewClusterNoPeersError(fmt.Errorf("preferred server %q not known", preferred))
	}
	return name, nil
}

// members is group g's membership: its latest configuration where the
// group reports it, else the cluster's initial peers.
func (c *clusterState) members(g uint16) []string {
	if ad, ok := c.r.Group(g).(GroupAdmin); ok {
		if m := ad.Members(); len(m) > 0 {
			return m
		}
	}
	return c.r.Peers()
}

// isMember reports whether the node named name (or with that peer hash)
// is a member of group g.
func (c *clusterState) isMember(g uint16, name string) bool {
	return c.memberName(g, name) != ""
}

// memberName is the member of group g named name or hashed to it, or "".
func (c *clusterState) memberName(g uint16, name string) string {
	for _, m := range c.members(g) {
		if m == name || peerHash(m) == name {
			return m
		}
	}
	return ""
}

// serverRemoveRequest is nats-server's JSApiMetaServerRemoveRequest: the
// server by name, or by peer id.
type serverRemoveRequest struct {
	Server string `json:"peer"`
	Peer   string `json:"peer_id"`
}

// partitionRemoved is a node's answer to subjPartitionRemove.
type partitionRemoved struct {
	Groups []uint16 `json:"groups"`
	Errors []string `json:"errors,omitempty"`
}

// serverRemove takes a server out of the cluster for good: out of every
// partition (each partition's leader removes it, wherever that is), then
// out of the meta group. Answered by the meta leader once done.
func (c *clusterState) serverRemove(sys Account, reply string, body []byte) {
	if c.r == nil || !c.metaLeader() {
		return
	}
	const typ = api.TypeMetaServerRemoveResponse
	fail := func(aerr *api.Error) { sysReply(sys, reply, &api.Response{Type: typ, Error: aerr}) }
	if isEmptyBody(body) {
		fail(api.NewBadRequestError())
		return
	}
	var req serverRemoveRequest
	if aerr := decode(body, &req); aerr != nil {
		fail(aerr)
		return
	}
	name := ""
	switch {
	case req.Peer != "":
		name = c.memberName(0, req.Peer)
	case req.Server != "":
		if c.isMember(0, req.Server) {
			name = req.Server
		}
	}
	if name == "" {
		fail(api.NewClusterServerNotMemberError())
		return
	}
	if err := c.removeFromPartitions(sys, name); err != nil {
		fail(api.NewRaftGeneralError(err))
		return
	}
	if ad, ok := c.r.Group(0).(GroupAdmin); ok {
		if err := ad.RemoveServer(name); err != nil {
			fail(api.NewRaftGeneralError(err))
			return
		}
	}
	c.e.log.Info("jetstream cluster: server removed", "server", name)
	sysReply(sys, reply, &api.SuccessResponse{Response: api.Response{Type: typ}, Success: true})
}

// removeFromPartitions asks every node to remove name from the partitions
// it leads and waits until every partition has answered.
func (c *clusterState) removeFromPartitions(sys Account, name string) error {
	var mu sync.Mutex
	done := map[uint16]bool{}
	var errs []string
	all := make(chan struct{})
	inbox := newInbox()
	unsub, err := sys.SubscribeInternal(inbox, func(_, _, _, msg []byte) {
		var ans partitionRemoved
		if json.Unmarshal(msg, &ans) != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, g := range ans.Groups {
			done[g] = true
		}
		errs = append(errs, ans.Errors...)
		if len(done) == c.r.Partitions() || len(errs) > 0 {
			select {
			case <-all:
			default:
				close(all)
			}
		}
	})
	if err != nil {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	defer unsub()
	req, _ := json.Marshal(serverRemoveRequest{Server: name})
	sys.Publish(subjPartitionRemove, inbox, nil, req)
	select {
	case <-all:
	case <-time.After(removeTimeout):
	}
	mu.Lock()
	defer mu.Unlock()
	if len(errs) > 0 {
		return fmt.Errorf("remove %s: %s", name, strings.Join(errs, "; "))
	}
	if len(done) < c.r.Partitions() {
		var missing []string
		for g := 1; g <= c.r.Partitions(); g++ {
			if !done[uint16(g)] {
				missing = append(missing, fmt.Sprintf("P%d", g))
			}
		}
		return fmt.Errorf("remove %s: no leader removed it from %s", name, strings.Join(missing, ", "))
	}
	return nil
}

// partitionRemove removes a server from each partition this node leads
// (a partition it is no longer in counts as done: a repeated removal
// completes the one before) and answers with those partitions.
func (c *clusterState) partitionRemove(sys Account, reply string, body []byte) {
	if c.r == nil {
		return
	}
	var req serverRemoveRequest
	if json.Unmarshal(body, &req) != nil || req.Server == "" {
		return
	}
	var ans partitionRemoved
	for g := uint16(1); int(g) <= c.r.Partitions(); g++ {
		grp := c.r.Group(g)
		if !grp.IsLeader() {
			continue
		}
		ad, ok := grp.(GroupAdmin)
		if !ok {
			ans.Errors = append(ans.Errors, fmt.Sprintf("P%d: membership changes not supported", g))
			continue
		}
		if slices.Contains(ad.Members(), req.Server) {
			if err := ad.RemoveServer(req.Server); err != nil {
				ans.Errors = append(ans.Errors, fmt.Sprintf("P%d: %v", g, err))
				continue
			}
		}
		ans.Groups = append(ans.Groups, g)
	}
	if len(ans.Groups) > 0 || len(ans.Errors) > 0 {
		sysReply(sys, reply, &ans)
	}
}

// streamPeerRemove answers STREAM.PEER.REMOVE: a replica can leave a
// stream only for another server to take its place, and every server of
// the cluster is already a member of every partition; so a member peer
// gets 10075, as nats-server answers when no replacement exists.
func (a *jsAccount) streamPeerRemove(req apiRequest, name string) any {
	const typ = api.TypeStreamRemovePeerResponse
	c := a.e.cl
	if c == nil || c.r == nil {
		return streamErr(typ, api.NewClusterRequiredError())
	}
	if isEmptyBody(req.body) {
		return streamErr(typ, api.NewBadRequestError())
	}
	var preq struct {
		Peer string `json:"peer"`
	}
	if aerr := decode(req.body, &preq); aerr != nil {
		return streamErr(typ, aerr)
	}
	if preq.Peer == "" {
		return streamErr(typ, api.NewBadRequestError())
	}
	s := a.lookup(name)
	if s == nil {
		return streamErr(typ, api.NewStreamNotFoundError())
	}
	member := false
	if g := groupOf(s.id); g != 0 {
		member = c.isMember(g, preq.Peer)
	} else {
		self := c.r.NodeID()
		member = preq.Peer == self || preq.Peer == peerHash(self)
	}
	if !member {
		return streamErr(typ, api.NewClusterPeerNotMemberError())
	}
	return streamErr(typ, api.NewPeerRemapError())
}

// isEmptyBody reports whether an API body says nothing: empty, or an
// empty JSON object.
func isEmptyBody(body []byte) bool {
	b := bytes.TrimSpace(body)
	if len(b) == 0 {
		return true
	}
	var m map[string]json.RawMessage
	return json.Unmarshal(b, &m) == nil && len(m) == 0
}

// newInbox is a fresh reply subject for the engine's own requests.
func newInbox() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "_INBOX.JSC." + hex.EncodeToString(b[:])
}
