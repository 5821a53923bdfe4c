package service

import (
	"context"
	"encoding/json"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/engine/chat"
	"github.com/cloison/cloison/tenancy"
)

// Conversation state of the Responses API: a response stored with store
// true keeps the conversation it ends (input and output), so that a later
// request naming it as previous_response_id continues it. The
// instructions are not carried over (OpenAI does not carry them either):
// each request gives its own.

// Conversation is what a stored response's sealed blob holds: the response
// object as the transport encodes it, and the conversation it ends
// (without instructions).
type Conversation struct {
	Response json.RawMessage `json:"response"`
	Messages []chat.Message  `json:"messages"`
}

// LoadConversation opens tenant t's stored response id. Errors: those of
// LoadStored (ErrStoreOff; ErrNoResponse for another tenant's, an unknown
// or a deleted id), a blob that does not decode.
func (r *Responses) LoadConversation(ctx context.Context, t cloison.TenantID, id string) (Conversation, error) {
	plain, err := r.LoadStored(ctx, t, id)
	if err != nil {
		return Conversation{}, err
	}
	var c Conversation
	if err := json.Unmarshal(plain, &c); err != nil {
		return Conversation{}, err
	}
	return c, nil
}

// History is the conversation that tenant t's stored response previous
// ended: what a request naming it as previous_response_id continues.
// Errors: those of LoadConversation.
func (r *Responses) History(ctx context.Context, t cloison.TenantID, previous string) ([]chat.Message, error) {
	c, err := r.LoadConversation(ctx, t, previous)
	if err != nil {
		return nil, err
	}
	return c.Messages, nil
}

// ConversationMessages is the conversation the template renders for one
// request: its instructions as a system message (none when empty), the
// previous response's conversation, its own input.
func ConversationMessages(instructions string, history, input []chat.Message) []chat.Message {
	var m []chat.Message
	if instructions != "" {
		m = append(m, chat.Message{Role: "system", Content: instructions})
	}
	m = append(m, history...)
	return append(m, input...)
}

// Keep seals and stores p's completed response id (of request rid) with
// the conversation it ends, and ledgers response.stored in the same
// transaction (Store). Errors: ErrStoreOff, Store's, a response that does
// not encode.
func (r *Responses) Keep(ctx context.Context, p tenancy.Principal, rid cloison.RequestID, id audit.Name, response json.RawMessage, conv []chat.Message) error {
	if !r.StoreOn() {
		return ErrStoreOff
	}
	plain, err := json.Marshal(Conversation{Response: response, Messages: conv})
	if err != nil {
		return err
	}
	return r.Store(ctx, p, rid, id, plain)
}
