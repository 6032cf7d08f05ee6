// Starts a real Bluesky PDS, the reference implementation (@atproto/pds), with an in-process PLC
// directory (@atproto/dev-env's TestNetworkNoAppView), on loopback ports chosen at random.
// Creates two accounts: the lane's account, with an app password, and a second one to follow.
// Prints ONE JSON line on stdout once all is ready:
//
//   {"pds": "http://127.0.0.1:PORT", "handle": "...", "did": "did:plc:...", "password": "APP PASSWORD",
//    "friend_handle": "...", "friend_did": "did:plc:..."}
//
// and stays up until stdin closes, or SIGTERM or SIGINT; then it stops the PDS and the PLC and
// exits 0. Everything else (logs, errors) goes to stderr. Run it with Node 22 or later
// (scripts/bluesky-pds/install puts one in scripts/bluesky-pds/node/bin).
import net from 'node:net'

// The PDS and the PLC listen on a port only, on every interface. Bind them to loopback: this
// server has a well-known admin password and accepts any account.
const listen = net.Server.prototype.listen
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === 'number' && (args.length === 1 || typeof args[1] === 'function')) {
    args.splice(1, 0, '127.0.0.1')
  }
  return listen.apply(this, args)
}

const { TestNetworkNoAppView } = await import('@atproto/dev-env')

const log = (...a) => console.error('bluesky-pds:', ...a)

const network = await TestNetworkNoAppView.create({})
const pdsURL = `http://127.0.0.1:${network.pds.port}`

async function createAccount(handle, password) {
  const agent = network.pds.getAgent()
  await agent.createAccount({ handle, email: `${handle.split('.')[0]}@atmost.invalid`, password })
  return agent
}

const password = 'atmost-' + Math.random().toString(36).slice(2)
const agent = await createAccount('atmost.test', password)
const app = await agent.com.atproto.server.createAppPassword({ name: 'atmost' })
const friend = await createAccount('bob.test', password)

process.stdout.write(
  JSON.stringify({
    pds: pdsURL,
    handle: agent.session.handle,
    did: agent.session.did,
    password: app.data.password,
    friend_handle: friend.session.handle,
    friend_did: friend.session.did,
  }) + '\n',
)
log(`PDS on ${pdsURL}, PLC on ${network.plc.url}; stop with SIGTERM or by closing stdin`)

let stopping = false
async function stop(why) {
  if (stopping) return
  stopping = true
  log(`stopping (${why})`)
  const timer = setTimeout(() => process.exit(0), 5000)
  timer.unref()
  try {
    await network.close()
  } catch (err) {
    log('close:', err)
  }
  process.exit(0)
}
process.on('SIGTERM', () => stop('SIGTERM'))
process.on('SIGINT', () => stop('SIGINT'))
process.stdin.on('end', () => stop('stdin closed'))
process.stdin.on('error', () => stop('stdin error'))
process.stdin.resume()
