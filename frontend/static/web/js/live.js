// The live-events websocket (/ws/events/): reconnects by itself with capped, jittered backoff and
// shows its state. Correctness never depends on the socket: pages fill gaps over REST by seq.

const STATE_TEXT = {
  connecting: "Connecting…",
  live: "Live",
  reconnecting: "Reconnecting…",
  offline: "Offline — retrying",
};
const MIN_DELAY_MS = 500;
const MAX_DELAY_MS = 10000;

export class LiveConnection {
  /**
   * @param {object} options
   * @param {() => object[]} options.subscriptions  messages to send after every (re)connect
   * @param {(msg: object) => void} options.onMessage
   * @param {() => Promise<void>|void} [options.onConnected]  runs before subscribing (gap fill)
   * @param {(state: string) => void} [options.onState]
   * @param {HTMLElement} [options.indicator]  element showing the state (role=status)
   */
  constructor(options) {
    this.options = options;
    this.socket = null;
    this.failures = 0;
    this.state = "connecting";
    this.timer = null;
    this.stopped = false;
  }

  url() {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    return `${scheme}//${location.host}/ws/events/`;
  }

  start() {
    this.connect();
    // A laptop waking up or a network coming back: try at once instead of waiting for the timer.
    window.addEventListener("online", () => this.retryNow());
    document.addEventListener("visibilitychange", () => { if (!document.hidden) this.retryNow(); });
    return this;
  }

  retryNow() {
    if (this.state === "live" || this.stopped) return;
    clearTimeout(this.timer);
    this.connect();
  }

  setState(state, detail = "") {
    this.state = state;
    const el = this.options.indicator;
    if (el) {
      el.dataset.state = state;
      el.textContent = STATE_TEXT[state] + (detail ? ` ${detail}` : "");
    }
    if (this.options.onState) this.options.onState(state);
  }

  connect() {
    if (this.socket) { this.socket.onclose = null; try { this.socket.close(); } catch (e) { /* closed */ } }
    this.setState(this.failures ? "reconnecting" : "connecting");
    let socket;
    try {
      socket = new WebSocket(this.url());
    } catch (e) {
      this.scheduleReconnect();
      return;
    }
    this.socket = socket;
    socket.onopen = async () => {
      this.failures = 0;
      try {
        if (this.options.onConnected) await this.options.onConnected();
      } catch (e) { /* a failed gap fill is retried on the next message or reconnect */ }
      if (socket.readyState !== WebSocket.OPEN) return;
      for (const message of this.options.subscriptions()) socket.send(JSON.stringify(message));
      this.setState("live");
    };
    socket.onmessage = (event) => {
      let message;
      try { message = JSON.parse(event.data); } catch (e) { return; }
      this.options.onMessage(message);
    };
    socket.onclose = () => {
      if (this.socket !== socket || this.stopped) return;
      this.scheduleReconnect();
    };
    socket.onerror = () => { /* onclose follows and schedules the retry */ };
  }

  scheduleReconnect() {
    this.failures += 1;
    const ceiling = Math.min(MAX_DELAY_MS, MIN_DELAY_MS * 2 ** (this.failures - 1));
    const delay = Math.round(ceiling / 2 + Math.random() * (ceiling / 2));
    this.setState(this.failures > 3 ? "offline" : "reconnecting", `(next try in ${Math.ceil(delay / 1000)} s)`);
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.connect(), delay);
  }

  /** Send one message now if the socket is open (else it is sent with the next subscriptions). */
  send(message) {
    if (this.socket && this.socket.readyState === WebSocket.OPEN) this.socket.send(JSON.stringify(message));
  }

  get connected() { return this.state === "live"; }
}
