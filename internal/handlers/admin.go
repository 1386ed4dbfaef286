package handlers

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

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
const maxAdminBody = 64 << 10

// NewAdmin builds the admin API's router. Every request needs
// "Authorization: Bearer <token>"; the token is compared in constant time.
func NewAdmin(ctl Control, token string, logger *slog.Logger) *echo.Echo {
	e := newEcho(logger)
	e.Use(requestID, recoverPanics(logger), bearer(token))
	a := &admin{ctl: ctl, logger: logger}
	e.GET("/admin/dependencies", a.list)
	e.PATCH("/admin/dependencies/:dep", a.patch)
	e.POST("/admin/dependencies/:dep/breaker", a.force)
	return e
}

func bearer(token string) echo.MiddlewareFunc {
	want := []byte("Bearer " + token)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			got := []byte(c.Request().Header.Get(echo.HeaderAuthorization))
			if subtle.ConstantTimeCompare(got, want) != 1 {
				c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="orderagg-admin"`)
				return &APIError{Status: http.StatusUnauthorized, Code: CodeUnauthorized, Message: "a valid bearer token is required"}
			}
			return next(c)
		}
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
	var f resilience.Force
	switch *req.Force {
	case "open":
		f = resilience.ForceOpen
	case "closed":
		f = resilience.ForceClosed
	case "none":
		f = resilience.ForceNone
	default:
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

func readBody(c echo.Context) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(c.Request().Body, maxAdminBody+1))
	if err != nil {
		return nil, badRequest("reading body: " + err.Error())
	}
	if len(body) > maxAdminBody {
		return nil, &APIError{Status: http.StatusRequestEntityTooLarge, Code: CodeTooLarge, Message: "body over 64 KiB"}
	}
	return body, nil
}

func badRequest(msg string) error {
	return &APIError{Status: http.StatusBadRequest, Code: CodeBadRequest, Message: msg}
}
