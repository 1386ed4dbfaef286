package handlers

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// WriteError writes the contract's error document with its status.
func TestWriteError(t *testing.T) {
	w := httptest.NewRecorder()
	WriteError(w, http.StatusTeapot, "NOPE", "no coffee")
	if w.Code != http.StatusTeapot || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, content type %q", w.Code, w.Header().Get("Content-Type"))
	}
	var b ErrorBody
	if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil || b.Error.Code != "NOPE" || b.Error.Message != "no coffee" {
		t.Errorf("body %q: %+v %v", w.Body, b, err)
	}
}

// WriteJSON: a value that cannot be encoded is a 500 error document,
// never half a body.
func TestWriteJSONUnencodable(t *testing.T) {
	w := httptest.NewRecorder()
	WriteJSON(w, http.StatusOK, map[string]any{"f": func() {}})
	var b ErrorBody
	if w.Code != http.StatusInternalServerError || json.Unmarshal(w.Body.Bytes(), &b) != nil || b.Error.Code != "INTERNAL" {
		t.Errorf("status %d body %q", w.Code, w.Body)
	}
}
