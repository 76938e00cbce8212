package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/hai-relay/relay/model"
)

func init() {
	register(command{name: "messages list", summary: "list passive messages, newest first (--to, --from, --limit, --before)", usage: "[--to A] [--from A] [--limit N] [--before MESSAGE_ID] [--json]", setup: messagesListCommand, wide: true})
}

func messagesListCommand(f *flags) runFunc {
	to := f.String("to", "", "only messages to `AGENT`")
	from := f.String("from", "", "only messages from `AGENT`")
	limit := f.Int("limit", model.DefaultPageSize, fmt.Sprintf("at most `N` messages (1..%d)", model.MaxPageSize))
	before := f.String("before", "", "page: messages older than `MESSAGE_ID`")
	return func(ctx context.Context, e *cliIO) error {
		if err := f.checkLimit(*limit); err != nil {
			return err
		}
		c, err := operator(e, f)
		if err != nil {
			return err
		}
		defer c.Close()
		ms, err := c.Messages(ctx, model.MessageFilter{To: *to, From: *from, Limit: *limit, Before: *before})
		if err != nil {
			return err
		}
		over, err := c.InboxShares(ctx, *to)
		if err != nil {
			return err
		}
		if f.json {
			return printJSON(e.stdout, map[string]any{"messages": ms, "over_share": over})
		}
		t := f.newTable(e.stdout, "MESSAGE", "FROM", "TO", "STATE", "CREATED", "BODY")
		for _, m := range ms {
			t.row(m.ID, m.From, m.To, string(m.State), ts(m.CreatedAt), m.Body)
		}
		if err := t.flush(); err != nil {
			return err
		}
		if len(ms) > 0 {
			morePages(e, len(ms), *limit, ms[len(ms)-1].ID, "messages list")
		}
		for _, s := range over {
			fmt.Fprintln(e.stdout, overShareLine(s))
		}
		return nil
	}
}

// overShareLine says that a sender is at its share of an inbox.
func overShareLine(s model.InboxShare) string {
	share := []string{}
	if s.ShareMessages > 0 {
		share = append(share, fmt.Sprintf("%d messages", s.ShareMessages))
	}
	if s.ShareBytes > 0 {
		share = append(share, fmt.Sprintf("%d bytes", s.ShareBytes))
	}
	return fmt.Sprintf("over share: %s has %d unacknowledged messages (%d bytes) to %s, at its share (%s): "+
		"its next message to %s is refused until %s acknowledges some",
		safeText(s.From), s.Messages, s.Bytes, safeText(s.To), strings.Join(share, ", "), safeText(s.To), safeText(s.To))
}
