package handlers

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/orderagg/orderagg/internal/hostguard"
	"github.com/orderagg/orderagg/internal/resilience"
)

// Control is what the admin API steers: the settings in force and the
// breakers. Implementations apply each change atomically and log it.
type Control interface {
	// Settings returns each dependency's settings, keyed like the --config file.
	Settings() map[string]map[string]any
	// Patch lays body (keys of the dependency's --config section) over the
	// dependency's settings. ErrUnknownDependency for a bad name; any other
	// error means the body was invalid and nothing changed.
	Patch(dep string, body []byte) (map[string]any, error)
	// ForceBreaker sets or clears the operator override of dep's breaker.
	ForceBreaker(dep string, f resilience.Force) error
}

// ErrUnknownDependency is returned by a Control for a name it does not know.
var ErrUnknownDependency = errors.New("unknown dependency")

// maxAdminBody bounds an admin request body: settings are small.
const maxAdminBody = "64K"

// NewAdmin builds the admin API's router. Every request needs
// "Authorization: Bearer <token>"; g, when set, checks Host and Origin
// first (internal/hostguard).
func NewAdmin(ctl Control, token string, g *hostguard.Guard, logger *slog.Logger) *echo.Echo {
	e := newEcho(logger, g)
	e.Use(bearer(token), middleware.BodyLimit(maxAdminBody))
	a := &admin{ctl: ctl, logger: logger}
	get(e, "/admin/dependencies", a.list)
	e.PATCH("/admin/dependencies/:dep", a.patch)
	e.POST("/admin/dependencies/:dep/breaker", a.force)
	return e
}

// bearer refuses, with 401 and a challenge, every request without the
// token; a missing header and a wrong token look alike to the caller.
func bearer(token string) echo.MiddlewareFunc {
	valid := tokenCheck(token)
	return middleware.KeyAuthWithConfig(middleware.KeyAuthConfig{
		KeyLookup:  "header:" + echo.HeaderAuthorization,
		AuthScheme: "Bearer",
		Validator:  func(key string, _ echo.Context) (bool, error) { return valid(key), nil },
		ErrorHandler: func(_ error, c echo.Context) error {
			c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="orderagg-admin"`)
			return &APIError{Status: http.StatusUnauthorized, Code: CodeUnauthorized, Message: "a valid bearer token is required"}
		},
	})
}

// tokenCheck reports whether a presented token is token. Both sides are
// hashed first, so the constant-time comparison always weighs 32 bytes
// against 32: subtle.ConstantTimeCompare returns at once on a length
// mismatch, which would tell a caller the token's length. An empty token
// matches nothing.
func tokenCheck(token string) func(string) bool {
	want := sha256.Sum256([]byte(token))
	return func(got string) bool {
		sum := sha256.Sum256([]byte(got))
		return subtle.ConstantTimeCompare(sum[:], want[:]) == 1 && token != ""
	}
}

type admin struct {
	ctl    Control
	logger *slog.Logger
}

func (a *admin) list(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]any{"dependencies": a.ctl.Settings()})
}

func (a *admin) patch(c echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	dep := c.Param("dep")
	after, err := a.ctl.Patch(dep, body)
	if err != nil {
		return a.controlError(dep, err)
	}
	return c.JSON(http.StatusOK, map[string]any{"name": dep, "settings": after})
}

// forces are the breaker overrides by the names the API takes.
var forces = map[string]resilience.Force{"open": resilience.ForceOpen, "closed": resilience.ForceClosed, "none": resilience.ForceNone}

func (a *admin) force(c echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	var req struct {
		Force *string `json:"force"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || req.Force == nil || dec.More() {
		return badRequest(`body must be {"force":"open"|"closed"|"none"}`)
	}
	f, ok := forces[*req.Force]
	if !ok {
		return badRequest(`force must be "open", "closed" or "none"`)
	}
	dep := c.Param("dep")
	if err := a.ctl.ForceBreaker(dep, f); err != nil {
		return a.controlError(dep, err)
	}
	return c.JSON(http.StatusOK, map[string]string{"name": dep, "force": *req.Force})
}

func (a *admin) controlError(dep string, err error) error {
	if errors.Is(err, ErrUnknownDependency) {
		return &APIError{Status: http.StatusNotFound, Code: CodeNotFound, Message: "unknown dependency " + strconv.Quote(dep)}
	}
	return badRequest(err.Error())
}

// readBody reads the body, which middleware.BodyLimit holds to
// maxAdminBody: beyond it the read fails with its 413.
func readBody(c echo.Context) ([]byte, error) {
	body, err := io.ReadAll(c.Request().Body)
	var tooLarge *echo.HTTPError
	switch {
	case errors.As(err, &tooLarge):
		return nil, &APIError{Status: tooLarge.Code, Code: CodeTooLarge, Message: "body over " + maxAdminBody + "B"}
	case err != nil:
		return nil, badRequest("reading body: " + err.Error())
	}
	return body, nil
}

func badRequest(msg string) error {
	return &APIError{Status: http.StatusBadRequest, Code: CodeBadRequest, Message: msg}
}
