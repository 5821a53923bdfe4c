package api

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/cloison/cloison/engine/chat"
)

// GET /v1/responses/{id}/input_items: the input items of a stored response
// (store: true), as OpenAI lists them — the conversation the model read
// (the previous responses' turns, then the request's own input; never the
// instructions, never this response's output), one item per message
// (input_text parts; output_text for the assistant's), per function call
// and per function call output. Items are named by their place in that
// conversation ("msg_<response>_<i>", "fc_…", "fco_…"), so that an id is
// stable across calls. Query: order (desc, the default: newest first; or
// asc), limit (1–100, default 20), after (an item id: the items that come
// after it in that order). Any other parameter is refused (400). Tenant
// scoped as GET /v1/responses/{id}: another tenant's id, an unknown, a
// deleted or a store: false response are 404.

// RespInputItem is one input item of a stored response.
type RespInputItem struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"` // message, function_call, function_call_output
	Status    string          `json:"status,omitempty"`
	Role      string          `json:"role,omitempty"`
	Content   []RespInputPart `json:"content,omitempty"`
	CallID    string          `json:"call_id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments *string         `json:"arguments,omitempty"`
	Output    *string         `json:"output,omitempty"`
}

// RespInputPart is a message item's text part (input_text, or output_text
// for an assistant's message).
type RespInputPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// RespItemList is the list object input_items answers.
type RespItemList struct {
	Object  string          `json:"object"` // list
	Data    []RespInputItem `json:"data"`
	FirstID *string         `json:"first_id"`
	LastID  *string         `json:"last_id"`
	HasMore bool            `json:"has_more"`
}

// inputItems turns the conversation a response read into items, oldest
// first.
func inputItems(base string, msgs []chat.Message) []RespInputItem {
	var out []RespInputItem
	for _, m := range msgs {
		n := len(out)
		switch {
		case m.Role == "tool":
			o := m.Content
			out = append(out, RespInputItem{ID: fmt.Sprintf("fco_%s_%d", base, n), Type: "function_call_output", Status: "completed", CallID: m.ToolCallID, Output: &o})
			continue
		case m.Content != "" || len(m.ToolCalls) == 0:
			part := "input_text"
			if m.Role == "assistant" {
				part = "output_text"
			}
			out = append(out, RespInputItem{ID: fmt.Sprintf("msg_%s_%d", base, n), Type: "message", Status: "completed", Role: m.Role,
				Content: []RespInputPart{{Type: part, Text: m.Content}}})
		}
		for _, tc := range m.ToolCalls {
			args := tc.Function.Arguments
			out = append(out, RespInputItem{ID: fmt.Sprintf("fc_%s_%d", base, len(out)), Type: "function_call", Status: "completed",
				CallID: tc.ID, Name: tc.Function.Name, Arguments: &args})
		}
	}
	return out
}

// inputItemsQuery reads input_items' query. Errors: ErrBadField.
func inputItemsQuery(r *http.Request) (desc bool, limit int, after string, err error) {
	q := r.URL.Query()
	for k := range q {
		switch k {
		case "order", "limit", "after":
			if len(q[k]) != 1 {
				return false, 0, "", ErrBadField.Withf("%s given %d times", k, len(q[k]))
			}
		default:
			return false, 0, "", ErrUnsupported.Withf("query parameter %q (order, limit and after are)", truncate(k, maxFieldName))
		}
	}
	desc, limit = true, 20
	switch o := q.Get("order"); o {
	case "", "desc":
	case "asc":
		desc = false
	default:
		return false, 0, "", ErrBadField.Withf(`order must be "asc" or "desc"`)
	}
	if l := q.Get("limit"); l != "" {
		n, perr := strconv.Atoi(l)
		if perr != nil || n < 1 || n > 100 {
			return false, 0, "", ErrBadField.Withf("limit must be an integer in [1, 100]")
		}
		limit = n
	}
	return desc, limit, q.Get("after"), nil
}

func (s *Server) responseInputItems(w http.ResponseWriter, r *http.Request) {
	desc, limit, after, err := inputItemsQuery(r)
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	id := r.PathValue("id")
	b, err := s.loadStored(r.Context(), principal(r).Tenant, id)
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	msgs := b.Messages
	if n := len(msgs) - len(b.Response.messagesOut()); n >= 0 {
		msgs = msgs[:n] // the conversation ends with this response's output
	}
	items := inputItems(strings.TrimPrefix(b.Response.ID, "resp_"), msgs)
	if desc {
		for i, j := 0, len(items)-1; i < j; i, j = i+1, j-1 {
			items[i], items[j] = items[j], items[i]
		}
	}
	if after != "" {
		k := -1
		for i, it := range items {
			if it.ID == after {
				k = i
				break
			}
		}
		if k < 0 {
			WriteHTTPError(w, ErrBadField.Withf("after names no input item of this response"))
			return
		}
		items = items[k+1:]
	}
	list := RespItemList{Object: "list", Data: items, HasMore: len(items) > limit}
	if list.HasMore {
		list.Data = items[:limit]
	}
	if list.Data == nil {
		list.Data = []RespInputItem{}
	}
	if n := len(list.Data); n > 0 {
		list.FirstID, list.LastID = &list.Data[0].ID, &list.Data[n-1].ID
	}
	writeJSON(w, 200, list)
}
