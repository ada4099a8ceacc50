// Live updates: one EventSource on api/v1/events for the whole page; views subscribe while
// they are shown. EventSource resumes with Last-Event-ID by itself after a drop.

import { loadSession, url } from "./api.js";

const listeners = new Set();
// The listeners that also take progress events (a running job's bar moved, no state change).
const progressListeners = new Set();
let source = null;
let state = "connecting";
const stateListeners = new Set();

function setState(next) {
  state = next;
  for (const fn of stateListeners) fn(state);
}

export function connect() {
  if (source !== null || typeof EventSource === "undefined") return;
  source = new EventSource(url("api/v1/events"), { withCredentials: true });
  source.addEventListener("open", () => {
    // A new stream after "offline" starts at "now": the views reload what they show.
    if (state === "offline") for (const fn of listeners) fn({ reset: true });
    setState("live");
  });
  source.addEventListener("error", () => {
    if (source.readyState !== EventSource.CLOSED) {
      setState("reconnecting"); // the browser retries by itself, with Last-Event-ID
      return;
    }
    // Refused (the session ended, or the server is down): check the session (a 401 goes to
    // the login page), then open a new stream.
    source = null;
    setState("offline");
    setTimeout(() => loadSession().then(connect, () => setTimeout(connect, 5000)), 2000);
  });
  // A state change ("job"), or a running job's progress ("progress": event.progress set).
  const dispatch = (to) => (msg) => {
    let event;
    try {
      event = JSON.parse(msg.data);
    } catch {
      return;
    }
    for (const fn of to) fn(event);
  };
  source.addEventListener("job", dispatch(listeners));
  source.addEventListener("progress", dispatch(progressListeners));
  source.addEventListener("reset", () => {
    for (const fn of listeners) fn({ reset: true });
  });
}

// fn(event) for every job state change (and, with { progress: true }, every progress event)
// until the returned function is called.
export function subscribe(fn, options) {
  listeners.add(fn);
  if (options && options.progress) progressListeners.add(fn);
  return () => {
    listeners.delete(fn);
    progressListeners.delete(fn);
  };
}

export function onState(fn) {
  stateListeners.add(fn);
  fn(state);
  return () => stateListeners.delete(fn);
}

// Returns a trigger that runs the async `fn` at most once per `ms`, and never more often than
// every 4x its own last duration: bursts of events coalesce into one reload, and a slow
// reload (a million jobs to count) paces itself instead of loading the server.
export function throttle(fn, ms) {
  let busy = false;
  let pending = false;
  let next = 0;
  const run = async () => {
    const wait = next - Date.now();
    if (wait > 0) {
      setTimeout(run, wait);
      return;
    }
    busy = true;
    pending = false;
    const started = Date.now();
    try {
      await fn();
    } catch {
      // the view shows its own errors; live updates just carry on
    }
    const took = Date.now() - started;
    next = Date.now() + Math.max(ms - took, 3 * took);
    busy = false;
    if (pending) run();
  };
  return () => {
    if (busy || next > Date.now()) {
      if (!pending) {
        pending = true;
        if (!busy) setTimeout(run, next - Date.now());
      }
      return;
    }
    run();
  };
}
