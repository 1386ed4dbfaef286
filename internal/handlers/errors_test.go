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
