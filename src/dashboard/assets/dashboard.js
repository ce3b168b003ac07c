// The rheo dashboard: plain browser JavaScript, no build step, no CDN.
// Everything it shows comes from the JSON API next to this file; every value
// is written with textContent, never parsed as HTML.
'use strict';

(function () {
  const params = new URLSearchParams(location.search);
  const refreshMs = Math.max(100, Number(params.get('refresh')) || 1000);
  const WINDOW = 120;
  const SVG = 'http://www.w3.org/2000/svg';

  let selected = null; // { stream, group }
  let allowWrites = false;
  let samples = []; // { at, lag }
  let busy = false;

  const $ = (id) => document.getElementById(id);

  function el(tag, text, className) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (className) node.className = className;
    return node;
  }

  async function api(path, body) {
    const init = body === undefined
      ? { headers: { accept: 'application/json' } }
      : { method: 'POST', headers: { 'content-type': 'application/json', 'x-rheo-dashboard': '1' }, body: JSON.stringify(body) };
    const response = await fetch(`api/${path}`, init);
    const data = await response.json();
    if (!response.ok) {
      const error = new Error(data && data.error ? `${data.error.message} [${data.error.code}]` : `HTTP ${response.status}`);
      throw error;
    }
    return data;
  }

  function status(text, isError) {
    const node = $('status');
    node.textContent = text;
    node.style.color = isError ? 'var(--danger)' : '';
  }

  function formatAge(ms) {
    if (!ms) return '0 s';
    const s = ms / 1000;
    if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
    if (s < 3600) return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
    if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
    return `${(s / 86400).toFixed(1)} d`;
  }

  function select(stream, group) {
    if (selected && selected.stream === stream && selected.group === group) return;
    selected = { stream, group };
    samples = [];
    history.replaceState(null, '', `${location.pathname}${location.search}#${encodeURIComponent(stream)}/${encodeURIComponent(group)}`);
    $('payload').hidden = true;
    void tick();
  }

  function renderOverview(data) {
    $('backend').textContent = data.backend;
    allowWrites = data.allowWrites === true;
    const mode = $('mode');
    mode.textContent = allowWrites ? 'writes allowed' : 'read-only';
    mode.className = allowWrites ? 'badge writes' : 'badge';
    for (const node of document.querySelectorAll('.writes')) node.hidden = !allowWrites;
    const body = $('groups').tBodies[0];
    const rows = [];
    for (const stream of data.streams) {
      if (stream.groups.length === 0) {
        const tr = el('tr');
        tr.append(el('td', stream.name), el('td', stream.partitions, 'num'), el('td', '(no groups)', 'muted'), el('td'), el('td'), el('td'));
        rows.push(tr);
      }
      for (const group of stream.groups) {
        const tr = el('tr');
        tr.dataset.stream = stream.name;
        tr.dataset.group = group.name;
        if (selected && selected.stream === stream.name && selected.group === group.name) tr.className = 'selected';
        tr.append(
          el('td', stream.name), el('td', stream.partitions, 'num'), el('td', group.name),
          el('td', group.lag, 'num lag'), el('td', group.leasesHeld, 'num'), el('td', group.deadLetters, 'num'),
        );
        tr.addEventListener('click', () => select(stream.name, group.name));
        rows.push(tr);
      }
    }
    body.replaceChildren(...rows);
    $('empty').hidden = data.streams.length > 0;
    if (!selected) {
      const fromHash = location.hash.slice(1).split('/').map(decodeURIComponent);
      const first = data.streams.flatMap((s) => s.groups.map((g) => ({ stream: s.name, group: g.name })));
      const wanted = first.find((g) => g.stream === fromHash[0] && g.group === fromHash[1]) || first[0];
      if (wanted) select(wanted.stream, wanted.group);
    }
  }

  function renderChart() {
    const svg = $('chart');
    const width = 600;
    const height = 160;
    const max = Math.max(1, ...samples.map((s) => s.lag));
    const x = (i) => (samples.length <= 1 ? width : (i / (WINDOW - 1)) * width + (WINDOW - samples.length) * (width / (WINDOW - 1)));
    const y = (lag) => height - 12 - (lag / max) * (height - 24);
    const nodes = [];
    for (const fraction of [0, 0.5, 1]) {
      const line = document.createElementNS(SVG, 'line');
      line.setAttribute('class', 'grid');
      line.setAttribute('x1', '0');
      line.setAttribute('x2', String(width));
      line.setAttribute('y1', String(y(max * fraction)));
      line.setAttribute('y2', String(y(max * fraction)));
      nodes.push(line);
      const label = document.createElementNS(SVG, 'text');
      label.setAttribute('x', '4');
      label.setAttribute('y', String(y(max * fraction) - 2));
      label.textContent = String(Math.round(max * fraction));
      nodes.push(label);
    }
    if (samples.length > 0) {
      const points = samples.map((s, i) => `${x(i).toFixed(1)},${y(s.lag).toFixed(1)}`);
      const area = document.createElementNS(SVG, 'polygon');
      area.setAttribute('class', 'area');
      area.setAttribute('points', `${x(0).toFixed(1)},${height} ${points.join(' ')} ${x(samples.length - 1).toFixed(1)},${height}`);
      const line = document.createElementNS(SVG, 'polyline');
      line.setAttribute('class', 'line');
      line.setAttribute('points', points.join(' '));
      nodes.push(area, line);
    }
    svg.replaceChildren(...nodes);
    svg.dataset.samples = String(samples.length);
    svg.dataset.last = samples.length ? String(samples[samples.length - 1].lag) : '';
    svg.dataset.max = String(max);
    $('window').textContent = String(WINDOW);
  }

  function renderGroup(data) {
    $('detail').hidden = false;
    $('detail-title').textContent = `${data.group} on ${data.stream}`;
    $('lag-total').textContent = String(data.lag);
    $('leases-held').textContent = String(data.leasesHeld);
    $('dead-count').textContent = String(data.deadLetters);
    $('lag-age').textContent = formatAge(Math.max(0, ...data.partitions.map((p) => p.ageMs)));
    samples.push({ at: Date.now(), lag: data.lag });
    if (samples.length > WINDOW) samples = samples.slice(-WINDOW);
    renderChart();
    const rows = data.partitions.map((p) => {
      const tr = el('tr');
      tr.append(el('td', p.partition, 'num'), el('td', p.frontier, 'num'), el('td', p.highWatermark, 'num'), el('td', p.lag, 'num'), el('td', formatAge(p.ageMs), 'num'));
      return tr;
    });
    $('partitions').tBodies[0].replaceChildren(...rows);
  }

  function renderDeadLetters(data) {
    const rows = data.deadLetters.map((d) => {
      const tr = el('tr');
      const actions = el('td');
      const view = el('button', 'payload');
      view.type = 'button';
      view.addEventListener('click', () => {
        const pre = $('payload');
        pre.hidden = false;
        pre.textContent = JSON.stringify({ id: d.event.id, type: d.event.type, key: d.event.key, payload: d.event.payload, metadata: d.event.metadata }, null, 2);
      });
      actions.append(view);
      if (allowWrites) {
        const redrive = el('button', 'redrive…');
        redrive.type = 'button';
        redrive.className = 'redrive-one';
        redrive.addEventListener('click', () => void write(`Redrive event ${d.event.id} of group "${data.group}"? It is offered again with attempts reset.`, 'redrive', { stream: data.stream, group: data.group, eventIds: [d.event.id] }));
        actions.append(' ', redrive);
      }
      tr.dataset.eventId = d.event.id;
      tr.append(el('td', d.event.id), el('td', d.event.partition, 'num'), el('td', d.event.sequence, 'num'), el('td', d.attempt, 'num'), el('td', d.reason ?? ''), el('td', new Date(d.deadLetteredAt).toLocaleString()), actions);
      return tr;
    });
    $('dead-letters').tBodies[0].replaceChildren(...rows);
    $('no-dead').hidden = rows.length > 0;
  }

  function confirmWith(text) {
    const dialog = $('confirm');
    $('confirm-text').textContent = text;
    return new Promise((resolve) => {
      dialog.addEventListener('close', () => resolve(dialog.returnValue === 'ok'), { once: true });
      dialog.returnValue = '';
      dialog.showModal();
    });
  }

  async function write(question, route, body) {
    if (!(await confirmWith(question))) return;
    try {
      const result = await api(route, body);
      status(route === 'redrive' ? `redrove ${result.redriven} dead letter(s)` : 'replay started', false);
    } catch (error) {
      status(error.message, true);
    }
    void tick();
  }

  async function tick() {
    if (busy) return;
    busy = true;
    try {
      renderOverview(await api('overview'));
      if (selected) {
        const q = `stream=${encodeURIComponent(selected.stream)}&group=${encodeURIComponent(selected.group)}`;
        const [group, dead] = await Promise.all([api(`group?${q}`), api(`dead-letters?${q}&limit=50`)]);
        renderGroup(group);
        renderDeadLetters(dead);
      }
      if ($('status').style.color) status('', false);
      document.body.dataset.ready = 'true';
    } catch (error) {
      status(`cannot refresh: ${error.message}`, true);
    } finally {
      busy = false;
    }
  }

  document.addEventListener('DOMContentLoaded', () => {
    $('redrive-all').addEventListener('click', () => {
      if (selected) void write(`Redrive every dead letter of group "${selected.group}" on stream "${selected.stream}"?`, 'redrive', { stream: selected.stream, group: selected.group });
    });
    $('replay').addEventListener('click', () => {
      if (!selected) return;
      const from = Number($('replay-from').value);
      void write(`Replay group "${selected.group}" from sequence ${from} in every partition? Settled events are delivered again.`, 'replay', { stream: selected.stream, group: selected.group, fromSequence: from });
    });
    void tick();
    setInterval(() => void tick(), refreshMs);
  });
})();
