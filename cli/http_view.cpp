#include "http_view.hpp"

#include <chrono>
#include <thread>

#include <httplib.h>

#include "fedcaf/log.hpp"
#include "protocol/network.hpp"

namespace fedcaf::cli {

namespace {

/// The page: polls /status every second and draws the clients, the
/// round's per-client transfers, memory over time and accuracy per round
/// with inline SVG. Nothing is fetched from anywhere else.
constexpr const char* page = R"html(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>fedcaf</title>
<style>
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.3em;margin:0 0 .3em} h2{font-size:1.05em;margin:1.2em 0 .4em}
table{border-collapse:collapse} td,th{padding:3px 10px;text-align:left;border-bottom:1px solid #ddd}
.bar{width:160px;height:10px;background:#eee;display:inline-block;vertical-align:middle}
.bar span{display:block;height:10px;background:#3b7dd8}
svg{background:#fafafa;border:1px solid #ddd} .muted{color:#777}
</style></head><body>
<h1>fedcaf <span id="role"></span></h1>
<div id="summary" class="muted">connecting...</div>
<h2>Clients</h2>
<table><thead><tr><th>client</th><th>state</th><th>address</th>
<th>model down (this round)</th><th>update up (this round)</th></tr></thead>
<tbody id="clients"></tbody></table>
<h2>Accuracy per round</h2><svg id="acc" width="520" height="160"></svg>
<h2>Memory (RSS, MiB) over time (s)</h2><svg id="mem" width="520" height="160"></svg>
<script>
function esc(s){return String(s).replace(/[&<>"']/g,c=>({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;',"'":'&#39;'}[c]))}
function bar(b,total){const p=total?Math.min(100,100*b/total):0;
 return '<span class="bar"><span style="width:'+p.toFixed(1)+'%"></span></span> '+p.toFixed(0)+'%'}
function plot(id,pts,ymin,ymax,label){const s=document.getElementById(id),W=520,H=160,L=45,B=20;
 if(!pts.length){s.innerHTML='<text x="60" y="80" fill="#777">no data yet</text>';return}
 const xs=pts.map(p=>p[0]),x0=Math.min(...xs),x1=Math.max(...xs,x0+1);
 const X=x=>L+(W-L-10)*(x-x0)/(x1-x0),Y=y=>H-B-(H-B-10)*(y-ymin)/((ymax-ymin)||1);
 let d=pts.map((p,i)=>(i?'L':'M')+X(p[0]).toFixed(1)+' '+Y(p[1]).toFixed(1)).join(' ');
 s.innerHTML='<path d="'+d+'" fill="none" stroke="#3b7dd8" stroke-width="2"/>'+
  pts.map(p=>'<circle cx="'+X(p[0])+'" cy="'+Y(p[1])+'" r="2.5" fill="#3b7dd8"/>').join('')+
  '<text x="2" y="14" font-size="11">'+ymax.toFixed(label)+'</text><text x="2" y="'+(H-B)+'" font-size="11">'+ymin.toFixed(label)+'</text>'+
  '<text x="'+L+'" y="'+(H-4)+'" font-size="11">'+x0.toFixed(0)+'</text><text x="'+(W-40)+'" y="'+(H-4)+'" font-size="11">'+x1.toFixed(0)+'</text>'}
async function tick(){try{const r=await fetch('/status');const s=await r.json();
 document.getElementById('role').textContent=s.role+' - '+s.aggregator;
 const last=s.rounds.length?s.rounds[s.rounds.length-1]:null;
 document.getElementById('summary').innerHTML='round <b id="round">'+s.round+'</b> of '+s.num_rounds+
  ' &middot; status <b id="status">'+esc(s.status)+'</b> &middot; '+s.clients.length+' clients &middot; model '+
  (s.model_bytes/1048576).toFixed(1)+' MiB &middot; refusals '+s.refusals+
  (last&&last.test_accuracy!==null?' &middot; accuracy '+last.test_accuracy.toFixed(4):'');
 document.getElementById('clients').innerHTML=s.clients.map(c=>'<tr class="client"><td>'+esc(c.id)+'</td><td>'+esc(c.state)+
  '</td><td>'+esc(c.address)+'</td><td>'+bar(c.bytes_down_round,s.model_bytes)+'</td><td>'+bar(c.bytes_up_round,s.model_bytes)+'</td></tr>').join('');
 const acc=s.rounds.filter(x=>x.test_accuracy!==null).map(x=>[x.round,x.test_accuracy]);
 plot('acc',acc,0,1,2);
 const mem=s.memory.map(m=>[m[0],m[1]/1048576]);
 plot('mem',mem,0,Math.max(1,...mem.map(m=>m[1]))*1.1,0);
}catch(e){document.getElementById('summary').textContent='the run has ended or is unreachable'}}
tick();setInterval(tick,1000);
</script></body></html>
)html";

/// Requests the live view answers: GET or HEAD of its own pages, without
/// a body or a Range, naming this host. Anything else is answered here
/// (405, 413, 416, 421) and goes no further.
httplib::Server::HandlerResponse screen(const httplib::Request& q,
                                        httplib::Response& r,
                                        const std::string& host,
                                        bool loopback) {
  using hr = httplib::Server::HandlerResponse;
  auto refuse = [&](int status, const char* why) {
    r.status = status;
    r.set_content(why, "text/plain");
    return hr::Handled;
  };
  if (q.method != "GET" && q.method != "HEAD")
    return refuse(405, "only GET and HEAD\n");
  if (!q.body.empty())
    return refuse(413, "no request body\n");
  if (q.has_header("Range"))
    return refuse(416, "no ranges\n");
  if (loopback) { // a page elsewhere that resolves its name to us: refused
    auto h = q.get_header_value("Host");
    auto name = h.rfind('[', 0) == 0 ? h.substr(0, h.find(']') + 1)
                                     : h.substr(0, h.find(':'));
    if (name != host && name != "[" + host + "]" && name != "localhost" &&
        name != "127.0.0.1" && name != "[::1]")
      return refuse(421, "this live view answers to its own address only\n");
  }
  return hr::Unhandled;
}

/// True iff `host` is a loopback address.
bool is_loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

} // namespace

result<std::unique_ptr<http_view>>
http_view::start(const std::string& where,
                 std::shared_ptr<live_status> status) {
  auto at = where.find(':') == std::string::npos
                ? parse_endpoint("127.0.0.1:" + where)
                : parse_endpoint(where);
  if (!at)
    return error{errc::bad_config, "--http: " + at.err().message};
  std::unique_ptr<http_view> view{new http_view};
  view->server_ = std::make_shared<httplib::Server>();
  auto& s = *view->server_;
  bool loopback = is_loopback(at->host);
  s.set_pre_routing_handler(
      [host = at->host, loopback](const httplib::Request& q,
                                  httplib::Response& r) {
        return screen(q, r, host, loopback);
      });
  s.set_payload_max_length(1024);
  s.set_read_timeout(std::chrono::seconds{5});
  s.set_write_timeout(std::chrono::seconds{5});
  s.set_keep_alive_max_count(100);
  s.set_keep_alive_timeout(5);
  s.Get("/metrics", [status](const httplib::Request&, httplib::Response& r) {
    r.set_content(status->prometheus(), "text/plain; version=0.0.4");
  });
  s.Get("/status", [status](const httplib::Request&, httplib::Response& r) {
    r.set_content(status->json(), "application/json");
  });
  s.Get("/", [](const httplib::Request&, httplib::Response& r) {
    r.set_content(page, "text/html; charset=utf-8");
  });
  auto port = at->port == 0
                  ? s.bind_to_any_port(at->host)
                  : (s.bind_to_port(at->host, at->port) ? at->port : -1);
  if (port < 0)
    return error{errc::io_error, "--http: cannot listen on " + where +
                                     " (in use, or not an address here)"};
  auto shown = at->host.find(':') == std::string::npos
                   ? at->host
                   : "[" + at->host + "]"; // IPv6
  view->url_ = "http://" + shown + ":" + std::to_string(port) + "/";
  if (!loopback)
    log_line(log_level::warning, "http",
             "the live view listens on " + where +
                 ", beyond this host: anyone who reaches it sees the run, and "
                 "cpp-httplib buffers request headers whole; keep it to "
                 "operators' networks");
  std::promise<void> ended;
  view->served_ = ended.get_future();
  std::thread{[server = view->server_, ended = std::move(ended)]() mutable {
    server->listen_after_bind();
    ended.set_value();
  }}.detach();
  return view;
}

http_view::~http_view() {
  server_->stop();
  // Workers finish the requests they are in; one held open by a slow
  // client would hold the process: after a second, it is left to end with
  // the process (the thread owns the server; the status it reads is
  // shared).
  served_.wait_for(std::chrono::seconds{1});
}

} // namespace fedcaf::cli
