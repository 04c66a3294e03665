package server

import (
	"encoding/json"
	"time"
)

// subjUserInfo asks the server who the requesting client is. nats-server
// imports it into every account, so any client may ask; natscli's
// `nats account info` asks it first.
const subjUserInfo = "$SYS.REQ.USER.INFO"

// UserInfo tells a client who it is: its user, account, permissions and
// how long its credentials remain valid. Field names are nats-server's.
type UserInfo struct {
	UserID      string        `json:"user"`
	Account     string        `json:"account"`
	AccountName string        `json:"account_name,omitempty"`
	UserName    string        `json:"user_name,omitempty"`
	Permissions *Permissions  `json:"permissions,omitempty"`
	Expires     time.Duration `json:"expires,omitempty"`
}

// Permissions are a user's publish, subscribe and response rights.
type Permissions struct {
	Publish   *SubjectPermission  `json:"publish"`
	Subscribe *SubjectPermission  `json:"subscribe"`
	Response  *ResponsePermission `json:"responses,omitempty"`
}

// SubjectPermission lists allowed and denied subjects.
type SubjectPermission struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// ResponsePermission is allow_responses: how many replies, for how long.
type ResponsePermission struct {
	MaxMsgs int           `json:"max"`
	Expires time.Duration `json:"ttl"`
}

// userInfoRequest answers a publish to $SYS.REQ.USER.INFO and reports
// whether subj was that; client.route calls it first. The request never
// reaches the account's subscribers: the answer comes from the server,
// whatever the account (in open mode, the global account).
func (c *client) userInfoRequest(subj, reply []byte) bool {
	if string(subj) != subjUserInfo {
		return false
	}
	c.answerUserInfo(string(reply))
	return true
}

// answerUserInfo publishes the client's UserInfo to reply in its own
// account. It runs on the client's read loop and does not block.
func (c *client) answerUserInfo(reply string) {
	if reply == "" {
		return
	}
	ui := &UserInfo{Account: c.acc.name, AccountName: c.acc.nameTag(), Permissions: c.perms.public()}
	if uc := c.userClaims(); uc != nil {
		ui.UserID, ui.UserName = uc.Subject, uc.Name
		if uc.Expires > 0 {
			ui.Expires = max(time.Until(time.Unix(uc.Expires, 0)).Truncate(time.Second), 0)
		}
	}
	b, err := json.Marshal(&sysAPIResponse{Server: c.srv.sysInfo(), Data: ui})
	if err != nil {
		c.logger().Error("user info reply", "err", err)
		return
	}
	c.acc.Publish(reply, "", nil, b)
}

// public is the permissions as nats-server shows them to their user; nil
// when the user may do anything.
func (p *permissions) public() *Permissions {
	if p == nil {
		return nil
	}
	out := &Permissions{
		Publish:   &SubjectPermission{Allow: p.pubAllow, Deny: p.pubDeny},
		Subscribe: &SubjectPermission{Allow: p.subAllow, Deny: p.subDeny},
	}
	if p.resp != nil {
		// The defaults openReply applies when the JWT leaves them out.
		out.Response = &ResponsePermission{MaxMsgs: p.resp.MaxMsgs, Expires: p.resp.Expires}
		if out.Response.MaxMsgs <= 0 {
			out.Response.MaxMsgs = 1
		}
		if out.Response.Expires <= 0 {
			out.Response.Expires = 2 * time.Minute
		}
	}
	return out
}
