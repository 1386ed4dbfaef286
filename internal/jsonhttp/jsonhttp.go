// Package jsonhttp writes JSON answers and the contract's JSON errors
// ({"error":{"code":…,"message":…}}) for the plain net/http handlers (the
// simulators and the dashboard); the echo handlers render the same shape
// through their one error handler.
package jsonhttp

import (
	"encoding/json"
	"net/http"
)

// ErrorBody is the contract's error document.
type ErrorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// Error writes status with the contract's JSON error.
func Error(w http.ResponseWriter, status int, code, msg string) {
	var b ErrorBody
	b.Error.Code, b.Error.Message = code, msg
	Write(w, status, b)
}

// Write writes v as JSON with status; a value that cannot be encoded
// becomes a 500 error document instead.
func Write(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"code":"INTERNAL","message":"encoding failed"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
