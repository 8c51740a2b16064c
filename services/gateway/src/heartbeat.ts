/**
 * This gateway replica's heartbeat (`punk.gateway.heartbeat`, every `GATEWAY_HEARTBEAT_MS`): the fronts holding calls
 * it accepted tell from its silence, within a second, that it is gone (a SIGKILL, a lost host), and answer those
 * calls at once instead of waiting out their deadlines (mcp-front gateway-calls.ts). NATS reports client
 * disconnections only to its system account, which services do not have, hence a heartbeat of our own.
 */
import { errorMessage, GATEWAY_HEARTBEAT_MS, subjects, type Bus, type GatewayHeartbeat, type Logger } from '@punk/lib';

/** A running heartbeat; `stop` sends a last beat marked `stopping` (a replica stopping on purpose is not lost). */
export interface Heartbeat {
  stop(): Promise<void>;
}

/** Starts publishing the heartbeat of replica `instanceId`; a failed beat is logged at debug (the next one follows). */
export function startHeartbeat(bus: Bus, log: Logger, instanceId: string): Heartbeat {
  const beat = (stopping: boolean) => {
    const message: GatewayHeartbeat = { instance: instanceId, ...(stopping && { stopping }) };
    return bus
      .publish(subjects.gatewayHeartbeat, message)
      .catch((error: unknown) => log.debug({ err: errorMessage(error) }, 'heartbeat not sent'));
  };
  void beat(false);
  const timer = setInterval(() => void beat(false), GATEWAY_HEARTBEAT_MS);
  timer.unref();
  return {
    stop: async () => {
      clearInterval(timer);
      await beat(true);
    },
  };
}
